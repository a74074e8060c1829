#include "rl/env/builtin_environments.h"

#include <stdexcept>

#include <fmt/format.h>

#include "data/corpus_skills.h"
#include "rl/env/math_verifier.h"

namespace nemotron::rl::env {

std::vector<EnvResult> MathEnvironment::score(std::span<const EnvRow> rows) {
  std::vector<EnvResult> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EnvResult& r = out[i];
    const std::string expected = rows[i].row ? row_expected_answer(*rows[i].row) : "";
    if (expected.empty()) {
      r.failed = true;
      r.error_kind = "row without an answer";
      r.info["error"] = "the row has no expected_answer (or ground_truth / answer) to compare with";
      continue;
    }
    const MathVerdict v = verify_math_answer(rows[i].completion, expected);
    r.reward = v.reward;
    r.info["expected_answer"] = expected;
    r.info["extracted_answer"] = v.extracted ? nlohmann::json(*v.extracted) : nlohmann::json(nullptr);
  }
  return out;
}

std::vector<EnvResult> ArithmeticSkillEnvironment::score(std::span<const EnvRow> rows) {
  std::vector<EnvResult> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EnvResult& r = out[i];
    const std::string expected = rows[i].row ? row_expected_answer(*rows[i].row) : "";
    int64_t want = 0;
    try {
      size_t used = 0;
      want = std::stoll(expected, &used);
      if (used != expected.size()) throw std::invalid_argument(expected);
    } catch (const std::exception&) {
      r.failed = true;
      r.error_kind = "answer not an integer";
      r.info["error"] = fmt::format("the row's expected_answer \"{}\" is not an integer", expected);
      continue;
    }
    const std::string& text = rows[i].completion;
    const std::optional<int64_t> got = data::extract_final_answer(text);
    // The format the SFT data teaches: the last non-blank line is exactly "The answer is N."
    size_t end = text.find_last_not_of(" \t\r\n");
    end = end == std::string::npos ? 0 : end + 1;
    const size_t line = text.rfind('\n', end == 0 ? 0 : end - 1);
    const std::string last = text.substr(line == std::string::npos ? 0 : line + 1, end - (line == std::string::npos ? 0 : line + 1));
    const bool format_ok = got && last == fmt::format("{}{}.", data::kAnswerPrefix, *got);
    r.info["expected_answer"] = expected;
    r.info["extracted_answer"] = got ? nlohmann::json(std::to_string(*got)) : nlohmann::json(nullptr);
    r.info["format_ok"] = format_ok;
    r.reward = got && *got == want && (format_ok || !require_final_line_) ? 1.0 : format_ok ? format_reward_ : 0.0;
  }
  return out;
}

}  // namespace nemotron::rl::env
