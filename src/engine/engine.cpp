#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "backend/cpu/parallel.h"
#include "core/error.h"

namespace nemotron::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::stop_token: return "stop_token";
    case FinishReason::stop_string: return "stop_string";
    case FinishReason::length: return "length";
    case FinishReason::max_seq_len: return "max_seq_len";
    case FinishReason::cancelled: return "cancelled";
  }
  return "?";
}

// A running request: its slot, result so far and the incremental detokenizer's offsets (as in
// vLLM: text is decoded from `prefix_offset`; what decoded up to `read_offset` is already in
// result.text; a trailing U+FFFD means an incomplete UTF-8 character, so wait for more tokens).
struct Engine::Sequence {
  size_t position = 0;
  int64_t slot = -1;
  SamplingParams params;
  bool wants_logits = false;  // Request::wants_logits
  Result result;
  bool prefilled = false;
  int64_t leader = -1;  // the slot whose prefill of the same prompt this one shares (its first step only)
  size_t prefix_offset = 0, read_offset = 0;
  size_t stop_scan_from = 0;  // stop strings are searched from here in result.text
  bool cancelling = false;    // on_token cancelled it while its next step was in flight (async_scheduling)
};

Engine::Engine(StepModel& model, const data::Tokenizer* tokenizer, EngineOptions options)
    : model_(model), tok_(tokenizer), options_(options) {}

uint64_t Engine::add(Request r) {
  const uint64_t id = r.id ? *r.id : next_id_;
  next_id_ = std::max(next_id_, id + 1);
  const std::string where = fmt::format("request {}", id);
  const int64_t V = model_.vocab_size();
  validate(r.params, where, V);
  if (r.prompt.empty()) throw InputError(where + ": empty prompt (no tokens)");
  for (int32_t t : r.prompt)
    if (t < 0 || t >= V) throw InputError(fmt::format("{}: prompt token {} outside the vocabulary [0, {})", where, t, V));
  if (static_cast<int64_t>(r.prompt.size()) >= model_.max_seq_len())
    throw InputError(fmt::format("{}: prompt of {} tokens leaves no room to generate (max_seq_len {})", where,
                                 r.prompt.size(), model_.max_seq_len()));
  if (!r.params.stop.empty() && !tok_)
    throw InputError(where + ": stop strings need a tokenizer to detokenize with");
  r.id = id;
  queue_.push_back({added_++, std::move(r), std::chrono::steady_clock::now()});
  return id;
}

void Engine::detokenize(Sequence& s, bool final) {
  if (!tok_) return;
  const std::vector<int32_t>& ids = s.result.tokens;
  std::span<const int32_t> all(ids);
  const std::string before = tok_->decode(all.subspan(s.prefix_offset, s.read_offset - s.prefix_offset), true);
  const std::string now = tok_->decode(all.subspan(s.prefix_offset), true);
  static const std::string kReplacement = "\xEF\xBF\xBD";
  const bool incomplete = now.size() >= 3 && now.compare(now.size() - 3, 3, kReplacement) == 0;
  if (now.size() > before.size() && (!incomplete || final) && now.compare(0, before.size(), before) == 0) {
    s.result.text += now.substr(before.size());
    s.prefix_offset = s.read_offset;
    s.read_offset = ids.size();
  } else if (final && now.compare(0, before.size(), before) != 0) {
    s.result.text += now.substr(std::min(now.size(), before.size()));  // a decoder that is not prefix-stable
  }
}

std::optional<FinishReason> Engine::check_finish(Sequence& s) {
  const SamplingParams& p = s.params;
  const int32_t last = s.result.tokens.back();
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), last) != p.stop_token_ids.end())
    return FinishReason::stop_token;
  if (!p.stop.empty()) {
    size_t cut = std::string::npos, longest = 0;
    for (const std::string& stop : p.stop) {
      size_t at = s.result.text.find(stop, s.stop_scan_from);
      if (at != std::string::npos) cut = std::min(cut, at);
      longest = std::max(longest, stop.size());
    }
    if (cut != std::string::npos) {
      s.result.text.resize(cut);  // vLLM leaves the stop string out of the text
      return FinishReason::stop_string;
    }
    // A stop string completed by later text starts at most longest-1 bytes before the end.
    s.stop_scan_from = s.result.text.size() >= longest ? s.result.text.size() - longest + 1 : 0;
  }
  if (static_cast<int64_t>(s.result.tokens.size()) >= p.max_new_tokens) return FinishReason::length;
  if (static_cast<int64_t>(s.result.prompt.size() + s.result.tokens.size()) >= model_.max_seq_len())
    return FinishReason::max_seq_len;
  return std::nullopt;
}

std::vector<Result> Engine::run(const FinishCallback& on_finish, const RunHooks& hooks) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const double seconds_before = stats_.seconds;
  const int64_t S = model_.max_slots(), V = model_.vocab_size();
  std::vector<Result> results(added_);
  std::vector<bool> done(added_, false);
  std::vector<std::optional<Sequence>> slots(static_cast<size_t>(S));
  int64_t running = 0;
  double last_prefill_step_s = 0;  // the wall time of the last step that prefilled (admission_delay_factor)
  auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  // A finished sequence leaves its slot at once (the next admission may refill it); its result
  // waits in `retired` for deliver().
  std::vector<Sequence> retired;
  auto retire = [&](Sequence& s, FinishReason why) {
    if (why != FinishReason::stop_string) detokenize(s, /*final=*/true);  // a stop string's text is already cut
    s.result.finish = why;
    model_.release(s.slot);
    --running;
    ++stats_.requests;
    const auto slot = static_cast<size_t>(s.slot);
    retired.push_back(std::move(s));
    slots[slot].reset();
  };
  // The tokens of the last step not yet shown to the hooks: a running sequence's slot or, for one
  // that finished, its index in `retired`; its logits row when the step brought logits back.
  struct Undelivered {
    int64_t slot = -1;
    size_t retired = 0;
    int64_t row = -1;
  };
  std::vector<Undelivered> undelivered;
  std::vector<float> undelivered_logits;
  // The host work of those tokens: on_token for each (which may cancel), then on_finish for each
  // finished sequence. Right after the step, or, with async_scheduling, while the next one runs.
  auto deliver = [&] {
    if (undelivered.empty() && retired.empty()) return;
    const auto h0 = Clock::now();
    for (const Undelivered& u : undelivered) {
      if (!hooks.on_token) break;
      Sequence& s = u.slot >= 0 ? *slots[static_cast<size_t>(u.slot)] : retired[u.retired];
      if (u.slot >= 0) detokenize(s, false);  // a finished one's text is final
      const std::span<const float> row =  // the logits row only for a request that asked (never a device step)
          s.wants_logits ? std::span<const float>(undelivered_logits.data() + static_cast<size_t>(u.row) * static_cast<size_t>(V),
                                                  static_cast<size_t>(V))
                         : std::span<const float>();
      if (!hooks.on_token(s.result, row) && u.slot >= 0) {
        if (options_.async_scheduling) s.cancelling = true;  // it is in the step in flight: ends after it
        else retire(s, FinishReason::cancelled);
      }
    }
    undelivered.clear();
    for (Sequence& s : retired) {
      stats_.seconds = seconds_before + since(t0);
      if (on_finish) on_finish(s.result, stats_);
      done[s.position] = true;
      if (hooks.keep_results) results[s.position] = std::move(s.result);
    }
    retired.clear();
    stats_.hook_seconds += since(h0);
  };

  while (true) {
    if (hooks.before_step) {
      const auto h0 = Clock::now();
      hooks.before_step();
      if (hooks.keep_results) results.resize(added_);  // requests added since the run began
      done.resize(added_, false);
      stats_.hook_seconds += since(h0);
    }
    // Every step, also one with nothing here, when the model steps with other engines (expert
    // parallelism: StepModel::group_has_work).
    const bool has_work = !(queue_.empty() && running == 0);
    if (!model_.group_has_work(has_work)) break;
    if (!has_work) {
      deliver();
      model_.idle_step();
      ++stats_.idle_steps;
      continue;
    }
    // Admit queued requests into free slots, in order, while the model has memory for them. The
    // model allocates at the first extend, so the requests admitted in this pass are asked for
    // together (each within max_seq_len, their memory summed: asking for the sum of their tokens
    // as one sequence refused a second request whenever two budgets passed max_seq_len, so that
    // each step admitted one request).
    std::vector<int64_t> admitted;  // token budgets (prompt + max_new_tokens) of this pass's requests
    const bool share = options_.prefix_sharing && model_.can_fork();
    std::map<std::vector<int32_t>, int64_t> leader_of;  // prompt -> the slot admitted with it in this pass
    const auto step_start = Clock::now();
    const bool weighs_delay = options_.admission_delay_factor > 0 && running > 0 && !queue_.empty();
    bool delayed = weighs_delay && std::chrono::duration<double>(step_start - queue_.front().at).count() <
                                       options_.admission_delay_factor * last_prefill_step_s;
    if (weighs_delay && options_.agree_delay) delayed = options_.agree_delay(delayed);
    for (int64_t slot = 0; slot < S && !queue_.empty() && !delayed; ++slot) {
      if (slots[static_cast<size_t>(slot)]) continue;
      Request& r = queue_.front().request;
      const int64_t total =
          std::min<int64_t>(static_cast<int64_t>(r.prompt.size()) + r.params.max_new_tokens, model_.max_seq_len());
      admitted.push_back(total);
      if (!model_.can_admit(admitted)) {
        if (running == 0)
          throw InputError(fmt::format("request {}: the model has no memory for a sequence of {} tokens even when idle",
                                       *r.id, total));
        break;  // wait for a running sequence to finish
      }
      Sequence s;
      s.position = queue_.front().position;
      s.slot = slot;
      s.params = r.params;
      s.wants_logits = r.wants_logits;
      s.result.id = *r.id;
      s.result.tag = r.tag;
      s.result.prompt = std::move(r.prompt);
      if (share) {
        const auto [it, first] = leader_of.try_emplace(s.result.prompt, slot);
        if (!first) s.leader = it->second;
      }
      queue_.pop_front();
      slots[static_cast<size_t>(slot)] = std::move(s);
      ++running;
    }
    if (running == 0) {
      deliver();
      continue;
    }

    // One step: prefill the new, decode the running. A request sharing its prompt with one
    // admitted in the same pass (prefix sharing: the G generations of a GRPO prompt) is not
    // extended: its first token is drawn from its leader's logits row, and its slot is forked
    // from the leader's after the step (the KV blocks shared, the Mamba states copied).
    std::vector<int64_t> ids;  // slots extended, row i of the logits for ids[i]
    std::vector<std::vector<int32_t>> tokens;
    std::vector<int64_t> row_of_slot(static_cast<size_t>(S), -1);
    bool prefill = false;
    for (auto& s : slots) {
      if (!s || s->leader >= 0) continue;
      row_of_slot[static_cast<size_t>(s->slot)] = static_cast<int64_t>(ids.size());
      ids.push_back(s->slot);
      if (!s->prefilled) {
        tokens.push_back(s->result.prompt);
        stats_.prefill_tokens += static_cast<int64_t>(s->result.prompt.size());
        s->prefilled = prefill = true;
      } else {
        tokens.push_back({s->result.tokens.back()});
      }
    }
    std::vector<int64_t> drawers, rows_of_draws;  // every running slot draws, in slot order
    std::vector<std::pair<int64_t, int64_t>> forks;
    for (auto& s : slots) {
      if (!s) continue;
      drawers.push_back(s->slot);
      if (s->leader >= 0) {
        rows_of_draws.push_back(row_of_slot[static_cast<size_t>(s->leader)]);
        forks.emplace_back(s->leader, s->slot);
        stats_.shared_prefill_tokens += static_cast<int64_t>(s->result.prompt.size());
        s->leader = -1;
        s->prefilled = true;
      } else {
        rows_of_draws.push_back(row_of_slot[static_cast<size_t>(s->slot)]);
      }
    }
    // Where the model offers it (a GPU) and every row is greedy or temperature-only, the tokens
    // are drawn where the logits are and only they come back; otherwise [S, V] logits come to the
    // host (top-k / top-p sort the vocabulary here; a request that wants its logits row gets it).
    bool on_device = model_.samples_on_device();
    for (int64_t slot : drawers) {
      const Sequence& s = *slots[static_cast<size_t>(slot)];
      on_device = on_device && device_samplable(s.params) && !(hooks.on_token && s.wants_logits);
    }
    std::vector<SampledToken> drawn(drawers.size());
    std::vector<float> logits;
    const auto m0 = Clock::now();
    std::vector<ops::RowSampling> rows;
    if (on_device) {
      rows.resize(drawers.size());
      for (size_t i = 0; i < drawers.size(); ++i) {
        const Sequence& s = *slots[static_cast<size_t>(drawers[i])];
        rows[i] = row_sampling(s.params, s.result.id, s.result.tokens.size());
      }
      if (forks.empty()) model_.launch_and_sample(ids, tokens, rows);
      else model_.launch_and_sample(ids, tokens, rows, rows_of_draws);
    } else {
      logits = model_.extend(ids, tokens);
      NM_CHECK(static_cast<int64_t>(logits.size()) == static_cast<int64_t>(ids.size()) * V,
               "extend returned {} logits for {} slots of vocabulary {}", logits.size(), ids.size(), V);
    }
    double model_s = since(m0);
    deliver();  // the last step's tokens (async_scheduling; otherwise none are left)
    const auto m1 = Clock::now();
    if (on_device) {
      drawn = model_.collect_draws();
      NM_CHECK(drawn.size() == drawers.size(), "extend_and_sample returned {} tokens for {} draws", drawn.size(),
               drawers.size());
    }
    // Before any token is handled: a leader that finishes at once releases its slot.
    if (!forks.empty()) model_.fork(forks);
    model_s += since(m1);
    stats_.model_seconds += model_s;
    if (prefill) {
      stats_.prefill_seconds += model_s;
      ++stats_.prefill_steps;
      last_prefill_step_s = since(step_start);
    }
    if (!on_device) {
      // Sampling is a pure function of (logits row, params, id, index): the rows are drawn on all
      // cores (a log-sum-exp over the vocabulary per row: 256 rows of 131072 logits is ~34M exps a
      // step, which on one core would take longer than the GPU's decode step), then applied in order.
      cpu::parallel_for(static_cast<int64_t>(drawers.size()), [&](int64_t i) {
        const Sequence& s = *slots[static_cast<size_t>(drawers[static_cast<size_t>(i)])];
        const float* row = logits.data() + static_cast<size_t>(rows_of_draws[static_cast<size_t>(i)]) * static_cast<size_t>(V);
        drawn[static_cast<size_t>(i)] = sample_token(row, V, s.params, s.result.id, s.result.tokens.size(), s.result.tokens);
      }, cpu::grain_for(V));
    }
    ++stats_.steps;
    stats_.peak_running = std::max(stats_.peak_running, static_cast<int64_t>(drawers.size()));
    // The tokens into the results and the finishes they make (a slot freed here is refilled at
    // the next step); the hooks' share of the work goes to deliver().
    for (size_t i = 0; i < drawers.size(); ++i) {
      Sequence& s = *slots[static_cast<size_t>(drawers[i])];
      if (s.cancelling) {  // its token is dropped: the hooks saw the result without it
        retire(s, FinishReason::cancelled);
        continue;
      }
      const SampledToken& t = drawn[i];
      s.result.tokens.push_back(t.token);
      s.result.logprobs.push_back(t.logprob);
      s.result.raw_logprobs.push_back(t.raw_logprob);
      ++stats_.decode_tokens;
      if (!s.params.stop.empty()) detokenize(s, false);
      const std::optional<FinishReason> why = check_finish(s);
      Undelivered u{s.slot, 0, rows_of_draws[i]};
      if (why) {
        retire(s, *why);
        u = {-1, retired.size() - 1, rows_of_draws[i]};
      }
      undelivered.push_back(u);
    }
    undelivered_logits = std::move(logits);
    stats_.seconds = seconds_before + since(t0);
    if (!options_.async_scheduling) deliver();
  }
  deliver();
  added_ = 0;
  stats_.seconds = seconds_before + std::chrono::duration<double>(Clock::now() - t0).count();
  for (size_t i = 0; i < done.size(); ++i) NM_CHECK(done[i], "request at position {} never finished", i);
  return results;
}

}  // namespace nemotron::engine
