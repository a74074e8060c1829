#include "train/context_batch.h"

#include <vector>

#include "model/context_split.h"

namespace nemotron::train {

namespace {

// The `n` tokens after each of this rank's chunks: [B, 2n] of `t`'s dtype; past the row's end
// `fill`.
Tensor after_chunks(const Tensor& t, const model::ContextChunks& c, int64_t n, double fill) {
  if (!t.defined()) return t;
  const int64_t B = t.dim(0), T = t.dim(1);
  std::vector<double> all = t.to_f64_vector(), out(static_cast<size_t>(B * 2 * n), fill);
  for (int64_t b = 0; b < B; ++b)
    for (int j = 0; j < 2; ++j) {
      const int64_t from = (c.chunk(j) + 1) * c.L;
      for (int64_t i = 0; i < n && from + i < T; ++i)
        out[static_cast<size_t>(b * 2 * n + j * n + i)] = all[static_cast<size_t>(b * T + from + i)];
    }
  return Tensor::from_vector<double>({B, 2 * n}, out).to_host(t.dtype()).to(t.backend());
}

}  // namespace

model::Batch context_shard(const model::Batch& batch, int rank, int size, int64_t lookahead) {
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
  if (lookahead > 0) {
    NM_CHECK(lookahead <= c.L, "context parallel: {} tokens after chunks of {}", lookahead, c.L);
    auto ahead = std::make_shared<model::Batch>();
    ahead->input_ids = after_chunks(batch.input_ids, c, lookahead, 0);
    ahead->labels = after_chunks(batch.labels, c, lookahead, -1);
    ahead->loss_mask = after_chunks(batch.loss_mask, c, lookahead, 0);
    ahead->seq_idx = after_chunks(batch.seq_idx, c, lookahead, -1);
    out.ahead = std::move(ahead);
  }
  return out;
}

}  // namespace nemotron::train
