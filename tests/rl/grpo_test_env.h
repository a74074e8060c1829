// What the GRPO tests share (tests/rl/grpo_trainer_test.cpp on the CPU, tests/cuda/
// grpo_step_cuda_test.cpp on the GPU against the CPU): an environment whose reward is a fixed
// function of the completion text, the fixture tokenizer, the prompts and the tiny run's config.
#pragma once
#include <fmt/format.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/config_tree.h"
#include "rl/env/environment.h"
#include "rl/rl_config.h"
#include "test_util.h"

namespace nemotron::rl::grpo_test {

// Reward 1 when the completion has an even number of bytes: a pure function of the text, which
// splits a random model's completions about evenly (so the advantages are not all 0).
class ParityEnvironment : public env::Environment {
 public:
  const char* name() const override { return "parity"; }
  std::vector<env::EnvResult> score(std::span<const env::EnvRow> rows) override {
    std::vector<env::EnvResult> out;
    for (const env::EnvRow& r : rows) {
      env::EnvResult e;
      e.reward = r.completion.size() % 2 == 0 ? 1.0 : 0.0;
      out.push_back(e);
    }
    return out;
  }
};

inline std::string fixture_tokenizer_path() {
  return (nemotron::testing::source_root() / "tests" / "fixtures" / "hf" / "dense" / "tokenizer.json").string();
}

// Prompt row i of the tests' data: a plain sum question in the NeMo Gym row format.
inline std::string question_row(int i) {
  return fmt::format(
      R"({{"responses_create_params": {{"input": [{{"role": "user", "content": "What is {} + {}?"}}]}}, "expected_answer": "{}"}})",
      i, 2 * i, 3 * i);
}

// The tiny run both tests train, scored by ParityEnvironment: Mamba, attention, MLP and no MoE (a
// near-tie in top-k routing would let rounding pick another expert on the GPU, a difference the
// GPU/CPU comparison could not tell from a fault); 3 prompts x 4 generations of up to 12 tokens,
// one optimizer step of 12 rows in micro-batches of 4; 4 steps, no KL, no checkpoints, float32
// on the CPU. A test sets what it varies by `overrides` (`grpo.max_num_steps=1`, `device=cuda`);
// `source` names the config in its error messages. No validation file when `val_jsonl` is empty.
inline RlConfig tiny_grpo_config(int64_t vocab, const std::string& train_jsonl, const std::string& val_jsonl,
                                 const std::vector<std::string>& overrides, const std::string& source) {
  const std::string yaml = fmt::format(R"(
model:
  vocab_size: {}
  hidden_size: 32
  hybrid_override_pattern: "M*-"
  max_position_embeddings: 256
  num_attention_heads: 4
  num_key_value_heads: 2
  head_dim: 8
  intermediate_size: 64
  mamba_num_heads: 4
  mamba_head_dim: 8
  n_groups: 1
  ssm_state_size: 8
  conv_kernel: 4
  chunk_size: 8
grpo: {{num_prompts_per_step: 3, num_generations_per_prompt: 4, max_num_steps: 4, max_num_epochs: 10, val_period: 0, seed: 7}}
loss_fn: {{reference_policy_kl_penalty: 0.0, ratio_clip_min: 0.2, ratio_clip_max: 0.28,
          use_importance_sampling_correction: true}}
policy:
  tokenizer: {{name: {}, chat_template: nano3}}
  max_total_sequence_length: 128
  train_global_batch_size: 12
  train_micro_batch_size: 4
  optimizer: {{lr: 3.0e-3, weight_decay: 0.0}}
  generation: {{max_new_tokens: 12}}
data: {{train_jsonl_fpath: {}{}}}
env: {{name: math}}
checkpointing: {{enabled: false}}
)",
                                       vocab, fixture_tokenizer_path(), train_jsonl,
                                       val_jsonl.empty() ? "" : ", validation_jsonl_fpath: " + val_jsonl);
  nlohmann::json tree = parse_yaml_text(yaml, source);
  apply_overrides(tree, overrides, source);
  RlConfig c = read_rl_config(tree, source);
  c.environment = std::make_shared<ParityEnvironment>();
  return c;
}

}  // namespace nemotron::rl::grpo_test
