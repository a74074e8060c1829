// What the GRPO tests share (tests/rl/grpo_trainer_test.cpp on the CPU, tests/cuda/
// grpo_step_cuda_test.cpp on the GPU against the CPU): an environment whose reward is a fixed
// function of the completion text, and the fixture tokenizer.
#pragma once
#include <span>
#include <string>
#include <vector>

#include "rl/env/environment.h"
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

}  // namespace nemotron::rl::grpo_test
