// The environments that score in-process: "math" (math_verifier.h against the row's expected
// answer) and "arithmetic", the tiny recipe's skill (data/corpus_skills.h): the SFT data teaches
// every answer to end with the line "The answer is N.", so the reward is 1 when that line carries
// the expected integer (with `require_final_line`, the default, it must also be the completion's
// last non-blank line, as the SFT data writes it).
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
  explicit ArithmeticSkillEnvironment(bool require_final_line = true) : require_final_line_(require_final_line) {}
  const char* name() const override { return "arithmetic"; }
  std::vector<EnvResult> score(std::span<const EnvRow> rows) override;

 private:
  bool require_final_line_;
};

}  // namespace nemotron::rl::env
