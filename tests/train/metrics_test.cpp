// The TensorBoard scalars of metrics.jsonl records: Megatron's tag names, validation suffixes, and
// other stages' own numbers passed through under their keys.
#include "train/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace nemotron::train {
namespace {

std::map<std::string, double> as_map(const io::Scalars& s) {
  std::map<std::string, double> m;
  for (const auto& [k, v] : s) EXPECT_TRUE(m.emplace(k, v).second) << "duplicate tag " << k;
  return m;
}

TEST(TensorBoardScalars, train_record_uses_megatron_tags) {
  const auto m = as_map(tensorboard_scalars({{"type", "train"},
                                             {"iteration", 7},
                                             {"consumed_samples", 28},
                                             {"lm_loss", 2.5},
                                             {"lr", 1e-4},
                                             {"grad_norm", 0.75},
                                             {"step_seconds", 0.125},
                                             {"tokens_per_second", 4096.0}}));
  const std::map<std::string, double> want = {{"lm loss", 2.5},         {"learning-rate", 1e-4},
                                              {"grad-norm", 0.75},      {"iteration-time", 0.125},
                                              {"tokens-per-second", 4096}, {"consumed_samples", 28}};
  EXPECT_EQ(m, want);
}

TEST(TensorBoardScalars, validation_record_adds_suffix_and_capped_ppl) {
  auto m = as_map(tensorboard_scalars({{"type", "validation"}, {"iteration", 4}, {"lm_loss", 3.0}}));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m["lm loss validation"], 3.0);
  EXPECT_DOUBLE_EQ(m["lm loss validation ppl"], std::exp(3.0));
  m = as_map(tensorboard_scalars({{"type", "validation"}, {"iteration", 4}, {"lm_loss", 50.0}}));
  EXPECT_DOUBLE_EQ(m["lm loss validation ppl"], std::exp(20.0));  // Megatron caps at exp(20)
}

TEST(TensorBoardScalars, other_numbers_pass_through_and_summaries_are_left_out) {
  const auto m = as_map(
      tensorboard_scalars({{"type", "rl"}, {"iteration", 3}, {"reward_mean", 0.5}, {"note", "x"}, {"done", true}}));
  EXPECT_EQ(m, (std::map<std::string, double>{{"reward_mean", 0.5}}));
  EXPECT_TRUE(tensorboard_scalars({{"type", "summary"}, {"iteration", 3}, {"seconds", 1.0}}).empty());
}

}  // namespace
}  // namespace nemotron::train
