#include "model/tensor_split.h"

#include <numeric>

namespace nemotron::model {

int64_t split_extent(int64_t global, const TensorSplit& split, const std::string& what) {
  if (!split.active()) return global;
  NM_CHECK(global % split.size == 0, "{}: {} does not split into {} tensor-parallel parts", what, global, split.size);
  return global / split.size;
}

Param& add_split(ParamStore& store, const std::string& name, const Shape& global, const TensorSplit& split,
                 bool weight_decay) {
  const int dim = split.dim();
  if (dim < 0) return store.add(name, global, weight_decay);
  NM_CHECK(dim < global.rank(), "{}: split dim {} of {}", name, dim, global.str());
  std::vector<int64_t> blocks = split.blocks;
  if (blocks.empty()) blocks.push_back(global[dim]);
  NM_CHECK(dim == 0 || blocks.size() == 1, "{}: only rows split block by block", name);
  NM_CHECK(std::accumulate(blocks.begin(), blocks.end(), int64_t{0}) == global[dim], "{}: blocks do not cover {}",
           name, global.str());
  std::vector<int64_t> local = global.dims();
  local[dim] = 0;
  ParamShard shard;
  shard.global_shape = global;
  int64_t global_row = 0;
  for (int64_t b : blocks) {
    const int64_t part = split_extent(b, split, name);
    if (blocks.size() > 1) shard.row_blocks.push_back({local[dim], part, global_row + split.rank * part});
    local[dim] += part;
    global_row += b;
  }
  if (blocks.size() == 1) {
    shard.offset.assign(global.rank(), 0);
    shard.offset[dim] = split.rank * local[dim];
  }
  Param& p = store.add(name, Shape(local), weight_decay);
  p.shard = shard;
  return p;
}

}  // namespace nemotron::model
