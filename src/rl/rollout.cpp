#include "rl/rollout.h"

#include <fmt/format.h>

#include <chrono>
#include <memory>

#include "core/error.h"
#include "core/json_limits.h"
#include "core/progress.h"
#include "data/jsonl.h"
#include "engine/cached_step_model.h"
#include "engine/engine.h"

namespace nemotron::rl {

using engine::CachedStepModel;
using engine::Engine;
using engine::EngineStats;
using engine::FinishReason;
using engine::Request;
using engine::Result;
using engine::SamplingParams;
using nlohmann::json;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::vector<RlPrompt> load_rl_prompts(const std::string& path, const data::Tokenizer& tok, const data::ChatTemplate& chat) {
  std::vector<RlPrompt> out;
  data::JsonlReader in(path);
  data::OrderedJson row;
  while (in.next_row(row)) {
    const std::string where = in.where();
    const auto params = row.find("responses_create_params");
    if (params == row.end() || !params->is_object() || !params->contains("input"))
      throw InputError(fmt::format("{}: responses_create_params.input: missing (a NeMo Gym row: run `data prep rl`)",
                                   where));
    data::OrderedJson messages = (*params)["input"];
    if (messages.is_string())
      messages = data::OrderedJson::array({{{"role", "user"}, {"content", messages.get<std::string>()}}});
    if (!messages.is_array() || messages.empty())
      throw InputError(fmt::format("{}: responses_create_params.input: expected a string or a non-empty list of "
                                   "messages",
                                   where));
    const data::OrderedJson tools = params->contains("tools") ? (*params)["tools"] : data::OrderedJson();
    std::string text;
    try {
      text = data::render_prompt(chat, messages, tools);
    } catch (const data::ChatTemplateError& e) {
      throw InputError(fmt::format("{}: {}", where, e.what()));
    }
    RlPrompt p;
    p.tokens = tok.encode(text, /*add_special_tokens=*/false);
    if (p.tokens.empty()) throw InputError(fmt::format("{}: the prompt encodes to no tokens", where));
    p.row = parse_json<json>(row.dump(), where);
    p.where = where;
    out.push_back(std::move(p));
  }
  if (out.empty()) throw InputError(fmt::format("{}: no rows", path));
  return out;
}

namespace {

// A row whose reward means something: generated (not an over-long prompt) and scored.
bool has_reward(const Rollout& r) { return !r.unscored && !(r.response.empty() && r.mask_sample); }

}  // namespace

double RolloutBatch::mean_reward() const {
  double s = 0;
  int64_t n = 0;
  for (const Rollout& r : rows)  // over-long prompts count as 0, as they always have
    if (!r.unscored) s += r.reward, ++n;
  return n > 0 ? s / static_cast<double>(n) : 0;
}

double RolloutBatch::accuracy() const {
  double s = 0;
  int64_t n = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!has_reward(rows[i])) continue;
    s += rows[i].reward >= 1.0 && finished[i] ? 1.0 : 0.0, ++n;
  }
  return n > 0 ? s / static_cast<double>(n) : 0;
}

RolloutBatch collect_rollouts(model::HybridModel& net, const data::Tokenizer& tok, env::Environment& env,
                              const std::vector<const RlPrompt*>& prompts, const RolloutOptions& opt) {
  NM_CHECK(opt.generations > 0 && opt.max_slots > 0, "bad rollout options");
  const int64_t L = opt.max_total_sequence_length, G = opt.generations;
  RolloutBatch b;
  const size_t n = prompts.size() * static_cast<size_t>(G);
  b.rows.resize(n);
  b.results.resize(n);
  b.finished.assign(n, false);

  auto t_setup = std::chrono::steady_clock::now();
  Context ctx{&net.params().backend(), nullptr, net.params().dtype()};
  ctx.groups = opt.groups;
  CachedStepModel step(net, ctx, std::min<int64_t>(opt.max_slots, static_cast<int64_t>(n)), L);
  Engine engine(step, &tok, engine::EngineOptions{opt.prefix_sharing});
  b.engine_setup_seconds = seconds_since(t_setup);

  SamplingParams base = opt.sampling;
  if (std::optional<int32_t> eos = tok.eos_token_id()) base.stop_token_ids.push_back(*eos);
  // The chat templates end an assistant turn with <|im_end|>.
  if (std::optional<int32_t> end = tok.token_to_id("<|im_end|>")) base.stop_token_ids.push_back(*end);
  std::vector<size_t> row_of;  // engine request order -> row
  for (size_t p = 0; p < prompts.size(); ++p) {
    const bool overlong = static_cast<int64_t>(prompts[p]->tokens.size()) >= L;
    if (overlong) ++b.overlong_prompts;
    for (int64_t g = 0; g < G; ++g) {
      const size_t i = p * static_cast<size_t>(G) + static_cast<size_t>(g);
      Rollout& r = b.rows[i];
      r.prompt = prompts[p]->tokens;
      if (overlong) {
        r.mask_sample = true;  // NeMo RL's loss_multiplier 0; still in its group's baseline
        continue;
      }
      Request q;
      q.prompt = prompts[p]->tokens;
      q.params = base;
      q.params.max_new_tokens =
          std::min<int64_t>(base.max_new_tokens, L - static_cast<int64_t>(prompts[p]->tokens.size()));
      q.id = opt.first_request_id + i;
      engine.add(std::move(q));
      row_of.push_back(i);
    }
  }

  std::unique_ptr<ProgressBar> bar;
  if (opt.progress_label && !row_of.empty())
    bar = std::make_unique<ProgressBar>(opt.progress_label, static_cast<int64_t>(row_of.size()), "seqs");
  const std::vector<Result> results = engine.run([&](const Result& r, const EngineStats&) {
    if (bar) bar->advance(1, static_cast<int64_t>(r.tokens.size()));
  });
  if (bar) bar->finish();
  b.generation_seconds = engine.stats().seconds;
  b.generated_tokens = engine.stats().decode_tokens;
  b.prefill_tokens = engine.stats().prefill_tokens;
  b.shared_prefill_tokens = engine.stats().shared_prefill_tokens;
  b.idle_steps = engine.stats().idle_steps;
  b.prefill_seconds = engine.stats().prefill_seconds;

  auto t_reward = std::chrono::steady_clock::now();
  std::vector<env::EnvRow> env_rows;
  std::vector<std::string> texts(results.size());
  for (size_t k = 0; k < results.size(); ++k) {
    const Result& res = results[k];
    Rollout& r = b.rows[row_of[k]];
    r.response = res.tokens;
    r.generation_logprobs.assign(res.logprobs.begin(), res.logprobs.end());
    r.truncated = res.finish == FinishReason::length || res.finish == FinishReason::max_seq_len;
    b.finished[row_of[k]] = !r.truncated;
    texts[k] = res.text;
  }
  for (size_t k = 0; k < results.size(); ++k)
    env_rows.push_back({&prompts[row_of[k] / static_cast<size_t>(G)]->row, texts[k]});
  const std::vector<env::EnvResult> scored = env.score(env_rows);
  NM_CHECK(scored.size() == env_rows.size(), "environment {} returned {} results for {} rows", env.name(),
           scored.size(), env_rows.size());
  b.scored_rows = static_cast<int64_t>(scored.size());
  for (size_t k = 0; k < scored.size(); ++k) {
    Rollout& r = b.rows[row_of[k]];
    r.unscored = scored[k].failed;
    r.reward = scored[k].reward;  // unscored: whatever the environment left there; nothing reads it
    b.unscored += r.unscored;
    b.results[row_of[k]] = scored[k];
  }
  b.reward_seconds = seconds_since(t_reward);
  return b;
}

}  // namespace nemotron::rl
