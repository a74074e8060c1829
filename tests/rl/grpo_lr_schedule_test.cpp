// The RL stage's learning-rate schedule (policy.optimizer): the warmup then constant rate the
// recipes always had, unchanged by default; Megatron's linear and cosine decay to min_lr at
// lr_decay_iters (grpo.max_num_steps when absent), counted in optimizer steps; bad keys named.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "grpo_test_env.h"

namespace nemotron::rl {
namespace {

RlOptimizerSection optimizer(const std::vector<std::string>& overrides) {
  std::vector<std::string> o = {"policy.optimizer.lr=1.0e-4", "policy.optimizer.lr_warmup_iters=2",
                                "policy.optimizer.lr_warmup_init=1.0e-5", "grpo.max_num_steps=10"};
  o.insert(o.end(), overrides.begin(), overrides.end());
  return grpo_test::tiny_grpo_config(64, "train.jsonl", "", o, "rl.yaml").optimizer;
}

TEST(GrpoLrSchedule, default_is_warmup_then_constant) {
  const RlOptimizerSection o = optimizer({});
  EXPECT_DOUBLE_EQ(o.lr_at(0), 1.0e-5);
  EXPECT_DOUBLE_EQ(o.lr_at(1), 1.0e-5 + 0.5 * 9.0e-5);
  for (int64_t step : {2, 3, 10, 11, 1000}) EXPECT_DOUBLE_EQ(o.lr_at(step), 1.0e-4) << step;
}

TEST(GrpoLrSchedule, linear_decays_to_min_lr_at_max_num_steps) {
  const RlOptimizerSection o = optimizer({"policy.optimizer.lr_decay_style=linear", "policy.optimizer.min_lr=2.0e-5"});
  EXPECT_EQ(o.lr_decay_iters, 10);
  EXPECT_DOUBLE_EQ(o.lr_at(1), 1.0e-5 + 0.5 * 9.0e-5);  // the warmup as before
  EXPECT_DOUBLE_EQ(o.lr_at(2), 1.0e-4);
  EXPECT_NEAR(o.lr_at(6), 2.0e-5 + 0.5 * 8.0e-5, 1e-18);  // halfway from step 2 to step 10
  EXPECT_NEAR(o.lr_at(10), 2.0e-5, 1e-18);
  EXPECT_DOUBLE_EQ(o.lr_at(11), 2.0e-5);
}

TEST(GrpoLrSchedule, cosine_with_its_own_decay_length) {
  const RlOptimizerSection o = optimizer({"policy.optimizer.lr_decay_style=cosine", "policy.optimizer.lr_decay_iters=6"});
  EXPECT_NEAR(o.lr_at(3), 1.0e-4 * 0.5 * (std::cos(std::numbers::pi / 4) + 1), 1e-18);
  EXPECT_NEAR(o.lr_at(4), 0.5e-4, 1e-18);
  EXPECT_DOUBLE_EQ(o.lr_at(7), 0.0);
}

TEST(GrpoLrSchedule, bad_values_name_their_key) {
  const auto expect_error = [](const std::vector<std::string>& o, const std::string& needle) {
    try {
      optimizer(o);
      ADD_FAILURE() << "accepted " << o[0];
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({"policy.optimizer.lr_decay_style=WSD"}, "rl.yaml: policy.optimizer.lr_decay_style: expected one of");
  expect_error({"policy.optimizer.min_lr=2.0e-4"}, "policy.optimizer.min_lr: expected a number in [0, lr");
  expect_error({"policy.optimizer.lr_decay_style=linear", "policy.optimizer.lr_decay_iters=2"},
               "policy.optimizer.lr_decay_iters: 2 must exceed lr_warmup_iters 2");
}

}  // namespace
}  // namespace nemotron::rl
