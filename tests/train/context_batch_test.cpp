// The trainer's cut of a batch for context parallelism (train/context_batch.h): each rank's rows
// are chunks r and 2C-1-r of every row, positions explicit, and the multi-token-prediction targets
// of a rank's chunks (rolled with the tokens after each chunk) are exactly the whole row's targets
// at those positions, packed-sequence boundaries and loss masks included.
#include "train/context_batch.h"

#include <gtest/gtest.h>

#include "model/context_split.h"

namespace nemotron::train {
namespace {

// Two rows of T tokens; row 1 packs sequences starting at 5 and at the first chunk edge.
model::Batch whole_batch(int64_t T, int64_t edge) {
  const int64_t B = 2;
  std::vector<int32_t> ids, labels, seq, pos;
  std::vector<float> mask;
  for (int64_t b = 0; b < B; ++b) {
    int32_t id = 0, at = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (b == 1 && (t == 5 || t == edge)) ++id, at = 0;
      ids.push_back(static_cast<int32_t>(100 * b + t));
      labels.push_back(t % 7 == 3 ? -1 : static_cast<int32_t>(100 * b + t + 1));
      mask.push_back(t % 5 == 1 ? 0.0f : 1.0f);
      seq.push_back(id);
      pos.push_back(at++);
    }
  }
  model::Batch mb{Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, labels),
                  Tensor::from_vector<float>({B, T}, mask), Tensor::from_vector<int32_t>({B, T}, seq),
                  Tensor::from_vector<int32_t>({B, T}, pos)};
  return mb;
}

// Rank r's rows of a whole [B, T] tensor, as host doubles.
std::vector<double> rows_of(const Tensor& whole, int r, int C) {
  const model::ContextChunks c{C, r, whole.dim(1) / (2 * C)};
  Tensor out = Tensor::empty({whole.dim(0), 2 * c.L}, whole.dtype());
  for (int j = 0; j < 2; ++j) model::copy_row_block(out, j * c.L, whole, c.chunk(j) * c.L, c.L);
  return out.to_f64_vector();
}

TEST(ContextBatch, chunks_and_mtp_targets_equal_the_whole_rows) {
  for (int C : {2, 4}) {
    const int64_t T = 8 * C, L = T / (2 * C), D = 2;
    const model::Batch whole = whole_batch(T, L);
    for (int k = 1; k <= D; ++k) {
      const model::MtpTargets all = model::mtp_targets(whole, whole.loss_mask, k, host_backend());
      double tokens = 0;
      for (int r = 0; r < C; ++r) {
        const model::Batch mine = context_shard(whole, r, C, D);
        EXPECT_TRUE(mine.context_split);
        EXPECT_EQ(mine.input_ids.to_f64_vector(), rows_of(whole.input_ids, r, C));
        EXPECT_EQ(mine.position_ids.to_f64_vector(), rows_of(whole.position_ids, r, C));
        EXPECT_EQ(mine.seq_idx.to_f64_vector(), rows_of(whole.seq_idx, r, C));
        const model::MtpTargets part = model::mtp_targets(mine, mine.loss_mask, k, host_backend());
        EXPECT_EQ(part.ids.to_f64_vector(), rows_of(all.ids, r, C)) << "C " << C << " k " << k << " rank " << r;
        EXPECT_EQ(part.labels.to_f64_vector(), rows_of(all.labels, r, C)) << "C " << C << " k " << k << " rank " << r;
        EXPECT_EQ(part.weights.to_f64_vector(), rows_of(all.weights, r, C)) << "C " << C << " k " << k << " rank " << r;
        tokens += part.tokens;
      }
      EXPECT_EQ(tokens, all.tokens) << "C " << C << " k " << k;  // the ranks' counts sum to the row's
    }
  }
}

TEST(ContextBatch, unpacked_rows_get_global_positions) {
  model::Batch whole = whole_batch(8, 2);
  whole.seq_idx = Tensor(), whole.position_ids = Tensor();
  const model::Batch mine = context_shard(whole, 1, 2);
  EXPECT_EQ(mine.position_ids.to_f64_vector(), (std::vector<double>{2, 3, 4, 5, 2, 3, 4, 5}));
  EXPECT_FALSE(mine.seq_idx.defined());
  EXPECT_FALSE(mine.ahead);
}

}  // namespace
}  // namespace nemotron::train
