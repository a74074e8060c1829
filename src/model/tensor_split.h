// How tensor parallelism (issue 23; Megatron's ColumnParallelLinear / RowParallelLinear) splits a
// parameter over the tensor group: one dim cut into ModelShard::tensor_size equal contiguous
// blocks, rank t holding block t, registered under the whole tensor's Hub name with its global
// shape and offset (model/param.h), so checkpoints reshard across layouts.
//   column: the output rows (dim 0) split: q/k/v, MLP up/gate, Mamba in_proj, the vocabulary.
//           A fused tensor whose rows are several consecutive blocks (Mamba's in_proj: z, x, B,
//           C, dt) splits each block on its own: the rank holds its part of every block.
//   row:    the input columns (dim 1) split: o_proj, down_proj, out_proj. The product is then a
//           partial sum that the caller sums over the tensor group.
// With tensor_size 1 every helper registers the whole tensor: today's code path.
#pragma once
#include <string>
#include <vector>

#include "model/model_shard.h"
#include "model/param.h"

namespace nemotron::model {

struct TensorSplit {
  enum class Kind : uint8_t { none, column, row };
  Kind kind = Kind::none;
  int rank = 0, size = 1;
  std::vector<int64_t> blocks;  // column: global sizes of consecutive row blocks (empty: one)

  static TensorSplit column(const ModelShard& s, std::vector<int64_t> blocks = {}) {
    return {Kind::column, s.tensor_rank, s.tensor_size, std::move(blocks)};
  }
  static TensorSplit row(const ModelShard& s) { return {Kind::row, s.tensor_rank, s.tensor_size, {}}; }
  bool active() const { return kind != Kind::none && size > 1; }
  // The dim split (0 for column, 1 for row), -1 when inactive.
  int dim() const { return !active() ? -1 : kind == Kind::column ? 0 : 1; }
};

// `global` / split.size (an internal check: layouts are validated before the model is built).
int64_t split_extent(int64_t global, const TensorSplit& split, const std::string& what);

// A parameter of global shape `global`, split by `split` along split.dim() (whole when inactive).
Param& add_split(ParamStore& store, const std::string& name, const Shape& global, const TensorSplit& split,
                 bool weight_decay);

}  // namespace nemotron::model
