// RL environments: what turns a generated completion into a reward (NeMo RL's environments,
// reference/pipeline-and-rl.md §2 and data-formats.md §7). An environment scores a batch of
// (dataset row, completion) pairs and returns one result per row, in order. Rule kept by every
// environment: a row that cannot be scored (missing answer field, server down, malformed reply)
// comes back `failed = true` ("unscored") with the reason in info["error"] and a short
// `error_kind`; score() never throws for a row. Its reward is unknown, not 0: the trainer leaves
// such rows out of the loss and the group baselines, logs each kind of reason once per step and
// stops the run past env.max_unscored_fraction (rl/grpo_trainer.cpp). Built in, by name:
//   "math"       boxed / #### / final-number answers against `expected_answer` (math_verifier.h)
//   "arithmetic" the tiny recipe's skill: "The answer is N." as its SFT data teaches
//   "nemo_gym"   a NeMo Gym resources server over HTTP (/seed_session, /verify; nemo_gym_client.h)
#pragma once
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nemotron {
class ConfigReader;
}

namespace nemotron::rl::env {

struct EnvRow {
  // The dataset row as `data prep rl` writes it (NeMo Gym shape): `responses_create_params`, the
  // verifier fields (`expected_answer`, `question`, ...), `agent_ref`, `task_name`.
  const nlohmann::json* row = nullptr;
  std::string completion;  // the generated assistant text (every assistant turn, concatenated)
};

struct EnvResult {
  double reward = 0;
  bool failed = false;     // unscored: reward is meaningless (left 0); info["error"] says why
  std::string error_kind;  // when failed: what kind of fault ("unreachable", "HTTP 500", ...)
  nlohmann::json info = nlohmann::json::object();  // e.g. extracted_answer, expected_answer, error
};

// The unscored rows of a batch by kind of fault, in order of first appearance: how many, and the
// first such row's reason as an example. A result without an error_kind is its own kind, named by
// its reason. What the trainer logs once per kind per step.
struct UnscoredKind {
  std::string kind;
  int64_t rows = 0;
  std::string example;  // the first row's info["error"]
};
std::vector<UnscoredKind> unscored_by_kind(std::span<const EnvResult> results);

// Counts over a scored batch, for the step's log line.
struct EnvStats {
  int64_t rows = 0, failed = 0;
  double reward_sum = 0;
  void add(const std::vector<EnvResult>& results);
  double mean_reward() const { return rows > 0 ? reward_sum / static_cast<double>(rows) : 0; }
};

class Environment {
 public:
  virtual ~Environment() = default;
  virtual const char* name() const = 0;
  // One result per row, in order. Never throws because of a row's content or a remote failure.
  virtual std::vector<EnvResult> score(std::span<const EnvRow> rows) = 0;
  // Before the first step: throws Error naming the configured URL (and its key) when a remote
  // environment's server does not answer; an in-process environment has nothing to check.
  virtual void check_health() const {}
};

// The built-in environments' names, for help texts and errors: "math, arithmetic, nemo_gym".
extern const char* const kEnvironmentNames;

// The environment `name` configured by `options` (the recipe's environment section; its unknown
// keys are errors). InputError naming the key for an unknown name or a bad option.
std::unique_ptr<Environment> make_environment(const std::string& name, ConfigReader& options);

// The expected answer of a row: `expected_answer` (NeMo Gym), else `ground_truth` (NeMo RL's
// extra_env_info), else `answer`; a number is written as text. Empty when the row has none.
std::string row_expected_answer(const nlohmann::json& row);

}  // namespace nemotron::rl::env
