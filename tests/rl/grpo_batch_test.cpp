// Rollouts -> micro-batches: labels and the token mask cover response tokens only, the
// generator's log-probs and the advantage sit at the positions of their tokens, over-long rows
// are cut and masked out (counted), the last micro-batch is padded.
#include <gtest/gtest.h>

#include "rl/grpo_batch.h"

namespace nemotron::rl {
namespace {

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (double x : t.to_f64_vector()) v.push_back(static_cast<int64_t>(x));
  return v;
}

TEST(GrpoBatch, response_tokens_only_overlong_masked_and_padding) {
  const std::vector<Rollout> rows{
      {{1, 2}, {3, 4}, {-0.3, -0.4}, 1.0},
      {{5}, {6, 7, 8, 9, 10, 11}, {-1, -1, -1, -1, -1, -1}, 0.0},  // 7 tokens > 6: cut, masked out
      {{1, 2}, {9}, {-0.9}, 0.0, true},
  };
  GrpoBatchOptions opt;
  opt.micro_batch_size = 2, opt.max_total_sequence_length = 6, opt.pad_id = 0, opt.mask_dtype = DType::f64;
  GrpoBatchCounts counts;
  const std::vector<GrpoMicroBatch> mb = build_grpo_micro_batches(rows, {0.5, -1.0, 2.0}, opt, &counts);
  ASSERT_EQ(mb.size(), 2u);
  EXPECT_EQ(counts.rows, 3);
  EXPECT_EQ(counts.overlong, 1);
  EXPECT_EQ(counts.filtered, 0);  // truncated, but overlong_filtering is off
  EXPECT_EQ(counts.padding_rows, 1);
  EXPECT_EQ(counts.loss_tokens, 3);  // 2 of row 0, 1 of row 2
  // Micro-batch 0: rows 0 and 1, T = 6 (row 1 cut to the limit).
  EXPECT_EQ(mb[0].batch.input_ids.shape().dims(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(ints(mb[0].batch.input_ids), (std::vector<int64_t>{1, 2, 3, 4, 0, 0, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(ints(mb[0].batch.labels), (std::vector<int64_t>{2, 3, 4, -100, -100, -100, 6, 7, 8, 9, 10, -100}));
  EXPECT_EQ(mb[0].batch.loss_mask.to_f64_vector(), (std::vector<double>{0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(mb[0].data.sample_mask, (std::vector<double>{1, 0}));
  EXPECT_EQ(mb[0].data.advantages, (std::vector<double>{0, 0.5, 0.5, 0, 0, 0, -1, -1, -1, -1, -1, 0}));
  EXPECT_EQ(mb[0].data.generation_logprobs, (std::vector<double>{0, -0.3, -0.4, 0, 0, 0, -1, -1, -1, -1, -1, 0}));
  // Micro-batch 1: row 2 and a padding row.
  EXPECT_EQ(ints(mb[1].batch.labels), (std::vector<int64_t>{2, 9, -100, -100, -100, -100}));
  EXPECT_EQ(mb[1].batch.loss_mask.to_f64_vector(), (std::vector<double>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(mb[1].data.generation_logprobs, (std::vector<double>{0, -0.9, 0, 0, 0, 0}));
  EXPECT_EQ(mb[1].data.sample_mask, (std::vector<double>{1, 0}));

  // Overlong filtering drops the truncated row; an environment's mask_sample too.
  opt.overlong_filtering = true;
  std::vector<Rollout> flagged = rows;
  flagged[0].mask_sample = true;
  const std::vector<GrpoMicroBatch> f = build_grpo_micro_batches(flagged, {0.5, -1.0, 2.0}, opt, &counts);
  EXPECT_EQ(counts.filtered, 2);
  EXPECT_EQ(counts.loss_tokens, 0);
  EXPECT_EQ(f[0].data.sample_mask, (std::vector<double>{0, 0}));
  EXPECT_EQ(f[1].data.sample_mask, (std::vector<double>{0, 0}));
}

// A row the environment could not score weighs nothing: sample mask 0 (the loss's weight and its
// normaliser both multiply by it), no loss tokens, counted apart from over-long and filtered rows.
TEST(GrpoBatch, unscored_rows_get_sample_mask_zero_and_are_counted) {
  std::vector<Rollout> rows{
      {{1, 2}, {3, 4}, {-0.3, -0.4}, 1.0},
      {{1, 2}, {5, 6, 7}, {-0.5, -0.6, -0.7}, 0.0},
      {{1, 2}, {8}, {-0.8}, 0.0},
  };
  rows[1].unscored = true;
  GrpoBatchOptions opt;
  opt.micro_batch_size = 4, opt.max_total_sequence_length = 8, opt.mask_dtype = DType::f64;
  GrpoBatchCounts counts;
  const std::vector<GrpoMicroBatch> mb = build_grpo_micro_batches(rows, {0.5, 0.0, -0.5}, opt, &counts);
  ASSERT_EQ(mb.size(), 1u);
  EXPECT_EQ(mb[0].data.sample_mask, (std::vector<double>{1, 0, 1, 0}));
  EXPECT_EQ(counts.unscored, 1);
  EXPECT_EQ(counts.overlong + counts.filtered, 0);
  EXPECT_EQ(counts.loss_tokens, 3);  // rows 0 and 2 only
  // Unscored and over-long at once: counted once, as unscored.
  rows[1].response = {5, 6, 7, 8, 9, 10, 11};
  rows[1].generation_logprobs.assign(7, -1.0);
  build_grpo_micro_batches(rows, {0.5, 0.0, -0.5}, opt, &counts);
  EXPECT_EQ(counts.unscored, 1);
  EXPECT_EQ(counts.overlong, 0);
}

TEST(GrpoBatch, mismatched_logprobs_are_refused) {
  GrpoBatchOptions opt;
  EXPECT_THROW(build_grpo_micro_batches({{{1}, {2, 3}, {-1}, 0.0}}, {0.0}, opt), Error);
}

}  // namespace
}  // namespace nemotron::rl
