#include "train/context_batch.h"

#include <vector>

#include "model/context_split.h"

namespace nemotron::train {

model::Batch context_shard(const model::Batch& batch, int rank, int size) {
  if (size == 1) return batch;
  NM_CHECK(!batch.context_split, "a batch split over the context group twice");
  const int64_t B = batch.input_ids.dim(0), T = batch.input_ids.dim(1);
  NM_CHECK(T % (2 * size) == 0, "context parallel: rows of {} tokens in {} chunks", T, 2 * size);
  const model::ContextChunks c{size, rank, T / (2 * size)};
  auto cut = [&](const Tensor& t) -> Tensor {
    if (!t.defined()) return t;
    NM_CHECK(t.rank() == 2 && t.dim(0) == B && t.dim(1) == T, "context parallel: {} beside input_ids [{}, {}]",
             t.describe(), B, T);
    Tensor out = Tensor::empty({B, 2 * c.L}, t.dtype(), t.backend());
    for (int j = 0; j < 2; ++j) model::copy_row_block(out, j * c.L, t, c.chunk(j) * c.L, c.L);
    return out;
  };
  Tensor positions = batch.position_ids;
  if (!positions.defined()) {  // one sequence per row: position = column
    std::vector<int32_t> p(static_cast<size_t>(B * T));
    for (int64_t i = 0; i < B * T; ++i) p[static_cast<size_t>(i)] = static_cast<int32_t>(i % T);
    positions = Tensor::from_vector<int32_t>({B, T}, p).to(batch.input_ids.backend());
  }
  model::Batch out{cut(batch.input_ids), cut(batch.labels), cut(batch.loss_mask), cut(batch.seq_idx), cut(positions)};
  out.context_split = true;
  return out;
}

}  // namespace nemotron::train
