#include "rl/env/environment.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/config_tree.h"
#include "core/error.h"
#include "rl/env/builtin_environments.h"
#include "rl/env/nemo_gym_client.h"

namespace nemotron::rl::env {

const char* const kEnvironmentNames = "math, arithmetic, nemo_gym";

void EnvStats::add(const std::vector<EnvResult>& results) {
  for (const EnvResult& r : results) {
    ++rows;
    failed += r.failed;
    reward_sum += r.reward;
  }
}

std::vector<UnscoredKind> unscored_by_kind(std::span<const EnvResult> results) {
  std::vector<UnscoredKind> out;
  for (const EnvResult& r : results) {
    if (!r.failed) continue;
    const std::string error = r.info.is_object() && r.info.contains("error") && r.info["error"].is_string()
                                  ? r.info["error"].get<std::string>()
                                  : std::string("no reason given");
    const std::string kind = r.error_kind.empty() ? error : r.error_kind;
    auto it = std::find_if(out.begin(), out.end(), [&](const UnscoredKind& k) { return k.kind == kind; });
    if (it == out.end()) out.push_back({kind, 1, error});
    else ++it->rows;
  }
  return out;
}

std::string row_expected_answer(const nlohmann::json& row) {
  if (!row.is_object()) return "";
  for (const char* key : {"expected_answer", "ground_truth", "answer"}) {
    const auto it = row.find(key);
    if (it == row.end() || it->is_null()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number()) return it->dump();
  }
  return "";
}

std::unique_ptr<Environment> make_environment(const std::string& name, ConfigReader& options) {
  std::unique_ptr<Environment> env;
  if (name == "math") env = std::make_unique<MathEnvironment>();
  else if (name == "arithmetic") {
    const bool final_line = options.get_bool("require_final_line", true);
    const double format_reward = options.get_number("format_reward", 0.0);
    if (!(format_reward >= 0 && format_reward < 1))
      options.fail("format_reward", fmt::format("expected a number in [0, 1) (a right answer gets 1), got {}", format_reward));
    env = std::make_unique<ArithmeticSkillEnvironment>(final_line, format_reward);
  }
  else if (name == "nemo_gym") env = std::make_unique<NemoGymEnvironment>(options);
  else
    throw InputError(fmt::format("{}: {}: unknown environment \"{}\" (built in: {})", options.source(),
                                 options.path().empty() ? "env" : options.path(), name, kEnvironmentNames));
  options.check_unknown_keys();
  return env;
}

}  // namespace nemotron::rl::env
