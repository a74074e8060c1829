#include "serve/engine_worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "core/error.h"

namespace nemotron::serve {

GenerationState Generation::wait(size_t seen) const {
  std::unique_lock lock(m_);
  cv_.wait(lock, [&] { return s_.finished || s_.tokens.size() > seen; });
  GenerationState out;
  seen = std::min(seen, s_.tokens.size());
  out.tokens.assign(s_.tokens.begin() + static_cast<std::ptrdiff_t>(seen), s_.tokens.end());
  if (s_.logprobs.size() >= seen)
    out.logprobs.assign(s_.logprobs.begin() + static_cast<std::ptrdiff_t>(seen), s_.logprobs.end());
  if (seen == 0) out.prompt_logprobs = s_.prompt_logprobs;
  out.text = s_.text;
  out.finished = s_.finished;
  out.finish = s_.finish;
  out.error = s_.error;
  out.error_status = s_.error_status;
  return out;
}

namespace {
constexpr const char* kShuttingDown = "the server is shutting down";

// In lockstep the admission delay (a clock decision) is rank 0's, sent to the other ranks at each
// step that weighs it.
engine::EngineOptions lockstep_options(engine::EngineOptions o, const WorkerRanks& ranks) {
  if (ranks.host)
    o.agree_delay = [host = ranks.host](bool delayed) {
      std::string flag = delayed ? "1" : "0";
      parallel::broadcast_text(*host, flag);
      return flag == "1";
    };
  return o;
}
}  // namespace

EngineWorker::EngineWorker(engine::StepModel& step, model::HybridModel& net, const data::Tokenizer& tok,
                           WorkerObservers observers, ThreadStart thread_start, engine::EngineOptions engine_options,
                           WorkerRanks ranks)
    : step_(step), net_(net), tok_(tok), observers_(std::move(observers)), thread_start_(std::move(thread_start)),
      ranks_(ranks), engine_(step, &tok, lockstep_options(engine_options, ranks)),
      thread_([this] { loop(); }) {}

EngineWorker::~EngineWorker() { stop(); }

std::shared_ptr<Generation> EngineWorker::submit(GenerationJob job) {
  auto gen = std::make_shared<Generation>();
  std::string failure;
  {
    std::lock_guard lock(m_);
    if (!stopping_) {
      incoming_.push_back({std::move(job), gen, std::chrono::steady_clock::now(), {}});
      cv_.notify_one();
      return gen;
    }
    failure = failure_;
  }
  finish(*gen, engine::FinishReason::cancelled, failure.empty() ? kShuttingDown : failure, failure.empty() ? 503 : 500);
  return gen;
}

void EngineWorker::stop() {
  {
    std::lock_guard lock(m_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    for (Pending& p : incoming_) finish(*p.gen, engine::FinishReason::cancelled, kShuttingDown, 503);
    incoming_.clear();
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

WorkerStats EngineWorker::stats() const {
  std::lock_guard lock(m_);
  return stats_;
}

void EngineWorker::finish(Generation& g, engine::FinishReason why, const std::string& error, int status) {
  {
    std::lock_guard lock(g.m_);
    g.s_.finished = true;
    g.s_.finish = why;
    g.s_.error = error;
    g.s_.error_status = status;
  }
  g.cv_.notify_all();
}

namespace {

engine::Request request_of(const GenerationJob& job, uint64_t tag) {
  engine::Request r;
  r.prompt = job.prompt;
  r.params = job.params;
  r.id = job.stream_id;
  r.tag = tag;
  r.wants_logits = job.top_logprobs >= 0;  // the rest sample on the GPU (only tokens come back)
  return r;
}

bool lists(const std::vector<uint64_t>& tags, uint64_t tag) {
  return std::find(tags.begin(), tags.end(), tag) != tags.end();
}

}  // namespace

StepMessage EngineWorker::next_message(bool outer) {
  std::deque<Pending> batch;
  StepMessage m;
  bool stopping;
  {
    std::lock_guard lock(m_);
    batch.swap(incoming_);
    stopping = stopping_;
    m.stop = outer && stopping && batch.empty();
  }
  for (Pending& p : batch) {
    Generation& g = *p.gen;
    if (g.cancelled()) {
      finish(g, engine::FinishReason::cancelled);
      std::lock_guard lock(m_);
      ++stats_.cancelled;
      continue;
    }
    {
      std::lock_guard lock(m_);
      ++stats_.requests;
      stats_.prompt_tokens += static_cast<int64_t>(p.job.prompt.size());
    }
    if (observers_.metrics) observers_.metrics->add_tokens(static_cast<int64_t>(p.job.prompt.size()), 0);
    const uint64_t tag = next_tag_++;
    m.admitted.push_back({request_of(p.job, tag), p.job.score_prompt, std::max<int64_t>(p.job.top_logprobs, 0),
                          p.job.params.max_new_tokens != 0});
    running_.emplace(tag, std::move(p));
  }
  if (ranks_.host)
    for (const auto& [tag, p] : running_)
      if (p.gen->cancelled() || stopping) m.cancelled.push_back(tag);
  if (ranks_.host) {
    std::string text = encode(m);
    parallel::broadcast_text(*ranks_.host, text);
  }
  return m;
}

void EngineWorker::apply(const StepMessage& m) {
  ending_ = m.cancelled;
  for (const AdmittedJob& a : m.admitted) {
    const uint64_t tag = a.request.tag;
    Generation& g = *running_.at(tag).gen;
    try {
      if (a.score_prompt) {
        std::vector<TokenLogprob> lp = prompt_logprobs(net_, a.request.prompt, a.top_logprobs, ranks_.groups);
        std::lock_guard lock(g.m_);
        g.s_.prompt_logprobs = std::move(lp);
      }
      if (!a.generates) {
        finish(g, engine::FinishReason::length);
        running_.erase(tag);
        continue;
      }
      engine_.add(a.request);
    } catch (const std::exception& e) {  // InputError: the routes check first, so this is a last line
      finish(g, engine::FinishReason::cancelled, e.what());
      running_.erase(tag);
    }
  }
}

void EngineWorker::loop() {
  bool started = true;
  if (thread_start_) try {
      thread_start_();
    } catch (const std::exception& e) {  // every job then fails with it (500), as after an engine failure
      std::fprintf(stderr, "serve: the engine thread could not start: %s\n", e.what());
      std::lock_guard lock(m_);
      stopping_ = true;
      failure_ = fmt::format("the engine thread could not start: {}", e.what());
      started = false;
    }
  engine::RunHooks hooks;
  hooks.keep_results = false;
  // A run's first step follows the wake message at once (every rank replays it just before the
  // run); each later step starts with a message of its own.
  bool first_step = false;
  hooks.before_step = [&] {
    if (first_step) first_step = false;
    else apply(next_message(/*outer=*/false));
    report_gauges();
  };
  hooks.on_token = [&](const engine::Result& r, std::span<const float> logits) {
    auto it = running_.find(r.tag);
    NM_CHECK(it != running_.end(), "a token for unknown request tag {}", r.tag);
    Pending& p = it->second;
    Generation& g = *p.gen;
    const auto now = std::chrono::steady_clock::now();
    if (ServerMetrics* m = observers_.metrics) {
      if (r.tokens.size() == 1) m->observe_time_to_first_token(std::chrono::duration<double>(now - p.submitted).count());
      else m->observe_inter_token_latency(std::chrono::duration<double>(now - p.last_token).count());
      m->add_tokens(0, 1);
    }
    p.last_token = now;
    {
      std::lock_guard lock(g.m_);
      g.s_.tokens.push_back(r.tokens.back());
      if (p.job.top_logprobs >= 0) g.s_.logprobs.push_back(token_logprob(logits, r.tokens.back(), p.job.top_logprobs));
      g.s_.text = r.text;
    }
    g.cv_.notify_all();
    bool stopping;
    {
      std::lock_guard lock(m_);
      ++stats_.generated_tokens;
      stopping = stopping_;
    }
    // In lockstep every rank ends a request at the same step: the one rank 0 listed it for.
    if (ranks_.host) return !lists(ending_, r.tag);
    return !g.cancelled() && !stopping;
  };
  auto on_finish = [&](const engine::Result& r, const engine::EngineStats&) {
    auto it = running_.find(r.tag);
    NM_CHECK(it != running_.end(), "a result for unknown request tag {}", r.tag);
    Generation& g = *it->second.gen;
    {
      std::lock_guard lock(g.m_);
      g.s_.text = r.text;  // final: the last characters held back for UTF-8 are in
    }
    bool shutdown = false;
    if (r.finish == engine::FinishReason::cancelled) {
      std::lock_guard lock(m_);
      ++stats_.cancelled;
      shutdown = stopping_ && !g.cancelled();  // ended by the server, not by its client leaving
    }
    if (shutdown) finish(g, r.finish, kShuttingDown, 503);
    else finish(g, r.finish);
    running_.erase(it);
  };

  while (started) {
    {
      std::unique_lock lock(m_);
      cv_.wait(lock, [&] { return stopping_ || !incoming_.empty(); });
    }
    try {
      // Woken: the jobs that arrived are admitted before the run (the other ranks replay the
      // same message before theirs), or the stop goes to every rank.
      const StepMessage wake = next_message(/*outer=*/true);
      if (wake.stop) break;
      apply(wake);
      first_step = true;
      engine_.run(on_finish, hooks);
      report_gauges();  // idle again
    } catch (const std::exception& e) {
      // The engine is left mid-run: fail what it held (the server answers 500) and keep serving.
      // Its state is unknown after this: fail what it held and whatever comes later (the routes
      // answer 500), rather than hang them.
      std::fprintf(stderr, "serve: the generation engine failed: %s\n", e.what());
      for (auto& [tag, p] : running_) finish(*p.gen, engine::FinishReason::cancelled, e.what());
      running_.clear();
      std::lock_guard lock(m_);
      stopping_ = true;
      failure_ = fmt::format("the generation engine failed: {}", e.what());
      break;
    }
  }
  // Whatever arrived while stopping.
  std::lock_guard lock(m_);
  for (Pending& p : incoming_)
    finish(*p.gen, engine::FinishReason::cancelled, failure_.empty() ? kShuttingDown : failure_,
           failure_.empty() ? 503 : 500);
  incoming_.clear();
}

void follow_worker(engine::StepModel& step, model::HybridModel& net, const data::Tokenizer& tok,
                   const engine::EngineOptions& engine_options, const WorkerRanks& ranks) {
  engine::Engine engine(step, &tok, lockstep_options(engine_options, ranks));
  std::vector<uint64_t> ending;
  auto receive = [&] {
    std::string text;
    parallel::broadcast_text(*ranks.host, text);
    return decode_step_message(text);
  };
  // What rank 0's apply() does, without the clients: the same forwards and the same queue.
  auto replay = [&](const StepMessage& m) {
    ending = m.cancelled;
    for (const AdmittedJob& a : m.admitted) try {
        if (a.score_prompt) prompt_logprobs(net, a.request.prompt, a.top_logprobs, ranks.groups);
        if (a.generates) engine.add(a.request);
      } catch (const std::exception&) {  // rank 0 meets the same and answers its client
      }
  };
  bool first_step = false;  // the run's first before_step replays nothing: the wake message did
  engine::RunHooks hooks;
  hooks.keep_results = false;
  hooks.before_step = [&] {
    if (first_step) first_step = false;
    else replay(receive());
  };
  hooks.on_token = [&](const engine::Result& r, std::span<const float>) { return !lists(ending, r.tag); };
  try {
    while (true) {
      const StepMessage wake = receive();
      if (wake.stop) break;
      replay(wake);
      first_step = true;
      engine.run({}, hooks);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serve: the generation engine failed: %s\n", e.what());
  }
}

void EngineWorker::report_gauges() {
  if (!observers_.metrics) return;
  EngineGauges g;
  const auto queued = static_cast<int64_t>(engine_.queued());
  {
    std::lock_guard lock(m_);
    g.waiting = static_cast<int64_t>(incoming_.size()) + queued;
  }
  g.running = static_cast<int64_t>(running_.size()) - queued;
  g.max_slots = step_.max_slots();
  const engine::EngineStats& e = engine_.stats();
  g.steps = e.steps, g.prefill_steps = e.prefill_steps;
  g.model_seconds = e.model_seconds, g.prefill_model_seconds = e.prefill_seconds;
  g.hook_seconds = e.hook_seconds, g.busy_seconds = e.seconds;
  if (observers_.state_bytes) std::tie(g.state_bytes_in_use, g.state_bytes_total) = observers_.state_bytes();
  observers_.metrics->set_engine(g);
}

}  // namespace nemotron::serve
