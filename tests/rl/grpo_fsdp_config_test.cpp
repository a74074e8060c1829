// GRPO's Megatron FSDP keys (policy.megatron_cfg.distributed_data_parallel_config): NeMo RL's
// use_custom_fsdp or Megatron's use_megatron_fsdp turns FSDP on and data_parallel_sharding_strategy
// says what it shards, as pretraining reads ddp.*: no_shard nothing, optim the distributed
// optimizer, optim_grads the gradients too, optim_grads_params the weights too; the strategy
// alone is inert (NeMo RL's recipes carry optim_grads_params beside use_custom_fsdp: false).
// Gradient and parameter sharding run with data parallelism only: the other layouts are refused
// naming the strategy's key. (Runs: cli.data_parallel.)
#include <gtest/gtest.h>

#include "core/error.h"
#include "grpo_test_env.h"

namespace nemotron::rl {
namespace {

const std::string kDdp = "policy.megatron_cfg.distributed_data_parallel_config.";

RlOptimizerSection optimizer(const std::vector<std::string>& overrides) {
  return grpo_test::tiny_grpo_config(64, "train.jsonl", "", overrides, "rl.yaml").optimizer;
}

TEST(GrpoFsdpConfig, flag_and_strategy_pick_what_is_sharded) {
  struct Case {
    std::vector<std::string> keys;
    train::Fsdp fsdp;
    bool distributed;
    std::string flag;
  };
  const std::vector<Case> cases = {
      {{}, train::Fsdp::off, false, ""},
      {{kDdp + "data_parallel_sharding_strategy=optim_grads_params"}, train::Fsdp::off, false, ""},
      {{kDdp + "use_custom_fsdp=true"}, train::Fsdp::off, false, kDdp + "use_custom_fsdp"},
      {{kDdp + "use_custom_fsdp=true", kDdp + "data_parallel_sharding_strategy=optim"}, train::Fsdp::off, true,
       kDdp + "use_custom_fsdp"},
      {{kDdp + "use_megatron_fsdp=true", kDdp + "data_parallel_sharding_strategy=optim_grads"}, train::Fsdp::grads,
       true, kDdp + "use_megatron_fsdp"},
      {{kDdp + "use_custom_fsdp=true", kDdp + "data_parallel_sharding_strategy=optim_grads_params"},
       train::Fsdp::grads_params, true, kDdp + "use_custom_fsdp"},
  };
  for (const Case& c : cases) {
    const RlOptimizerSection o = optimizer(c.keys);
    const std::string what = c.keys.empty() ? "no keys" : c.keys.back();
    EXPECT_EQ(o.fsdp, c.fsdp) << what;
    EXPECT_EQ(o.distributed, c.distributed) << what;
    EXPECT_EQ(o.fsdp_key, c.flag) << what;
  }
}

TEST(GrpoFsdpConfig, sharding_beyond_the_optimizer_needs_data_parallelism_only) {
  const auto expect_error = [](const std::vector<std::string>& o, const std::string& needle) {
    try {
      optimizer(o);
      ADD_FAILURE() << "accepted " << o.back();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const std::vector<std::string> params = {kDdp + "use_custom_fsdp=true",
                                           kDdp + "data_parallel_sharding_strategy=optim_grads_params"};
  const std::vector<std::string> grads = {kDdp + "use_custom_fsdp=true",
                                          kDdp + "data_parallel_sharding_strategy=optim_grads"};
  auto with = [](std::vector<std::string> v, const std::string& key) { return v.push_back(key), v; };
  expect_error(with(params, "model.tensor_model_parallel_size=2"),
               "rl.yaml: " + kDdp + "data_parallel_sharding_strategy: optim_grads_params with "
               "model.tensor_model_parallel_size 2 is not supported yet in GRPO (full parameter sharding");
  expect_error(with(grads, "model.context_parallel_size=2"),
               kDdp + "data_parallel_sharding_strategy: optim_grads with model.context_parallel_size 2 is not "
               "supported yet in GRPO (gradient sharding");
  expect_error(with(with(params, "model.n_groups=2"), "policy.generation.vllm_cfg.tensor_parallel_size=2"),
               kDdp + "data_parallel_sharding_strategy: optim_grads_params with "
               "policy.generation.vllm_cfg.tensor_parallel_size 2 is not supported yet");
  const std::vector<std::string> moe = {"model.hybrid_override_pattern=M*E", "model.n_routed_experts=4",
                                        "model.num_experts_per_tok=2", "model.moe_intermediate_size=16"};
  std::vector<std::string> moe_params = params;
  moe_params.insert(moe_params.end(), moe.begin(), moe.end());
  expect_error(with(moe_params, "policy.generation.vllm_cfg.expert_parallel_size=2"),
               kDdp + "data_parallel_sharding_strategy: optim_grads_params with "
               "policy.generation.vllm_cfg.expert_parallel_size 2 is not supported yet");
  // The distributed optimizer (optim) runs at any layout, as without FSDP.
  EXPECT_TRUE(optimizer({kDdp + "use_custom_fsdp=true", kDdp + "data_parallel_sharding_strategy=optim",
                         "model.tensor_model_parallel_size=2"})
                  .distributed);
}

}  // namespace
}  // namespace nemotron::rl
