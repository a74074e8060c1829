// The environments that score in-process: "math" (math_verifier.h against the row's expected
// answer) and "arithmetic", the tiny recipe's skill (data/corpus_skills.h): the SFT data teaches
// every answer to end with the line "The answer is N.", so the reward is 1 when that line carries
// the expected integer (with `require_final_line`, the default, it must also be the completion's
// last non-blank line, as the SFT data writes it). `format_reward` (default 0) gives partial
// credit to a completion in the taught format ("The answer is N." as its last line) with a wrong
// N: a shaping term for a policy too weak to be right often enough to learn from 0/1 rewards.
#pragma once
#include "rl/env/environment.h"

namespace nemotron::rl::env {

class MathEnvironment : public Environment {
 public:
  const char* name() const override { return "math"; }
  std::vector<EnvResult> score(std::span<const EnvRow> rows) override;
};

class ArithmeticSkillEnvironment : public Environment {
 public:
  explicit ArithmeticSkillEnvironment(bool require_final_line = true, double format_reward = 0.0)
      : require_final_line_(require_final_line), format_reward_(format_reward) {}
  const char* name() const override { return "arithmetic"; }
  std::vector<EnvResult> score(std::span<const EnvRow> rows) override;

 private:
  bool require_final_line_;
  double format_reward_;
};

}  // namespace nemotron::rl::env
