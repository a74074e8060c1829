// Rollout collection for GRPO (reference/pipeline-and-rl.md §2.1 steps 1-3): the RL rows of
// `data prep rl` rendered as the SFT stage taught the policy to read them (the recipe's chat
// template, the assistant's generation prompt), each prompt generated G times by the engine
// (engine/: continuous batching over a KV/SSM cache that reads the policy's parameters in place,
// so nothing is copied before a rollout), the completions scored by the environment.
// A prompt that leaves no room for a response below policy.max_total_sequence_length is not
// generated: its rows get an empty response and sample mask 0 (NeMo RL's loss_multiplier 0 for a
// prompt at or above max_seq_length) and are counted. A row the environment could not score is
// marked `unscored`: its reward is unknown, so it counts in no reward mean, accuracy, baseline or
// loss (it is not a reward of 0).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "engine/sampler.h"
#include "model/hybrid_model.h"
#include "rl/env/environment.h"
#include "rl/grpo_batch.h"

namespace nemotron::rl {

struct RlPrompt {
  nlohmann::json row;           // the NeMo Gym row (the environment reads its verifier fields)
  std::vector<int32_t> tokens;  // the rendered prompt, tokenized
  std::string where;            // "<file>:<line>" for messages
};

// Every row of a `data prep rl` JSONL file: responses_create_params.input (a string, or message
// items {role, content}) rendered with `chat` plus the generation prompt (data::render_prompt:
// thinking off, as the SFT data renders its prompts), encoded without added special tokens. A row without input, or
// one the template refuses, is an InputError naming the file and line; an empty file is one too.
std::vector<RlPrompt> load_rl_prompts(const std::string& path, const data::Tokenizer& tok, const data::ChatTemplate& chat);

struct RolloutOptions {
  int64_t generations = 1;            // G per prompt (rows of a prompt are adjacent)
  engine::SamplingParams sampling;    // temperature, top-p/k, max_new_tokens, stop strings, seed
  int64_t max_total_sequence_length = 512;
  int64_t max_slots = 64;             // sequences the engine runs at once
  uint64_t first_request_id = 0;      // request ids first_request_id, +1, ...: the sampling streams
  const char* progress_label = nullptr;  // a progress bar on stderr ("rollouts"); null = none
  bool prefix_sharing = true;         // engine::EngineOptions::prefix_sharing
  // The run's process groups (the engine's context carries them): a model split over a tensor
  // group decodes in lockstep with the group's other ranks, which run the same requests.
  const parallel::ProcessGroups* groups = nullptr;
};

struct RolloutBatch {
  std::vector<Rollout> rows;             // P*G, reward filled in (unscored: 0, and marked so)
  std::vector<env::EnvResult> results;   // the environment's answer per row (empty for an over-long prompt)
  std::vector<bool> finished;            // stopped by a stop token/string (NeMo RL's is_end)
  int64_t overlong_prompts = 0;          // prompts not generated (rows masked: overlong_prompts * G)
  int64_t scored_rows = 0;               // rows sent to the environment (over-long prompts are not)
  int64_t unscored = 0;                  // of those, rows it could not score (Rollout::unscored)
  int64_t generated_tokens = 0;
  int64_t prefill_tokens = 0;            // prompt tokens the engine prefilled
  int64_t shared_prefill_tokens = 0;     // prompt tokens it did not, sharing another row's prefill
  int64_t idle_steps = 0;                // engine steps with no rows of its own (engine::EngineStats)
  double prefill_seconds = 0;            // the engine's steps that prefilled (engine::EngineStats)
  double generation_seconds = 0;         // the engine's run
  double engine_setup_seconds = 0;      // the KV/SSM cache's allocation: no weights are copied
  double reward_seconds = 0;
  // Over every row but the unscored ones (an over-long prompt's rows count 0); 0 when none.
  double mean_reward() const;
  // Share of the scored rows with full reward (1) that ended properly: NeMo RL's accuracy,
  // mean(reward * is_end), for 0/1 rewards; partial credit (a format reward) does not count.
  double accuracy() const;
  // unscored / scored_rows (0 when nothing was sent), what env.max_unscored_fraction bounds.
  double unscored_fraction() const {
    return scored_rows > 0 ? static_cast<double>(unscored) / static_cast<double>(scored_rows) : 0.0;
  }
};

// Generates and scores `prompts` (each G times) with `net` as it is now.
RolloutBatch collect_rollouts(model::HybridModel& net, const data::Tokenizer& tok, env::Environment& env,
                              const std::vector<const RlPrompt*>& prompts, const RolloutOptions& opt);

}  // namespace nemotron::rl
