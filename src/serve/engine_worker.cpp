#include "serve/engine_worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <tuple>

#include "core/error.h"
#include "parallel/process_groups.h"

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
// step that weighs it. Under expert parallelism each data rank's engine weighs its own queue at its
// own steps: the ranks of its tensor group (one engine state, their own clocks) agree instead,
// delayed when any of them is.
engine::EngineOptions lockstep_options(engine::EngineOptions o, const WorkerRanks& ranks) {
  if (ranks.data_ranks > 1)
    o.agree_delay = [tensor = ranks.groups->tensor](bool delayed) {
      return tensor->all_reduce_host(delayed ? 1.0 : 0.0, parallel::ReduceOp::max) > 0;
    };
  else if (ranks.host)
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
                           WorkerRanks ranks, StepFault fault)
    : step_(step), net_(net), tok_(tok), observers_(std::move(observers)), thread_start_(std::move(thread_start)),
      ranks_(ranks), fault_(std::move(fault)), engine_(step, &tok, lockstep_options(engine_options, ranks)),
      queued_elsewhere_(static_cast<size_t>(ranks.data_ranks), 0) {
  if (ranks_.data_ranks > 1) stats_.requests_by_data_rank.assign(static_cast<size_t>(ranks_.data_ranks), 0);
  thread_ = std::thread([this] { loop(); });  // last: the members above are the thread's
}

EngineWorker::~EngineWorker() { stop(); }

std::shared_ptr<Generation> EngineWorker::submit(GenerationJob job) {
  std::vector<GenerationJob> jobs;
  jobs.push_back(std::move(job));
  return submit(std::move(jobs)).front();
}

std::vector<std::shared_ptr<Generation>> EngineWorker::submit(std::vector<GenerationJob> jobs) {
  std::vector<std::shared_ptr<Generation>> gens;
  for (size_t i = 0; i < jobs.size(); ++i) gens.push_back(std::make_shared<Generation>());
  std::vector<size_t> first(jobs.size(), 0);  // the first job with the same prompt: it names the group
  for (size_t i = 0; i < jobs.size(); ++i)
    while (jobs[first[i]].prompt != jobs[i].prompt) ++first[i];
  std::string failure;
  {
    std::lock_guard lock(m_);
    if (!stopping_) {
      // One lock: the worker takes them in one batch, so next_message() sees each group whole.
      const auto now = std::chrono::steady_clock::now();
      std::vector<uint64_t> group(jobs.size());
      for (size_t i = 0; i < jobs.size(); ++i) group[i] = first[i] == i ? next_group_++ : group[first[i]];
      for (size_t i = 0; i < jobs.size(); ++i) {
        Pending p{std::move(jobs[i]), gens[i], now, {}};
        p.group = group[i];
        incoming_.push_back(std::move(p));
      }
      cv_.notify_one();
      return gens;
    }
    failure = failure_;
  }
  for (auto& gen : gens)
    finish(*gen, engine::FinishReason::cancelled, failure.empty() ? kShuttingDown : failure, failure.empty() ? 503 : 500);
  return gens;
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

std::string EngineWorker::failure() const {
  std::lock_guard lock(m_);
  return failure_;
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
  std::map<uint64_t, int> group_rank;  // a group's data rank, set by its first generating job
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
    const bool generates = p.job.params.max_new_tokens != 0;
    if (generates && ranks_.data_ranks > 1) {
      auto [it, first] = group_rank.try_emplace(p.group, 0);
      if (first) it->second = least_loaded_data_rank();
      p.data_rank = it->second;
      std::lock_guard lock(m_);
      ++stats_.requests_by_data_rank[static_cast<size_t>(p.data_rank)];
    }
    m.admitted.push_back({request_of(p.job, tag), p.job.score_prompt, std::max<int64_t>(p.job.top_logprobs, 0),
                          generates, p.data_rank});
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
      if (a.data_rank == ranks_.data_rank()) engine_.add(a.request);  // else another data rank's engine runs it
    } catch (const std::exception& e) {  // InputError: the routes check first, so this is a last line
      finish(g, engine::FinishReason::cancelled, e.what());
      running_.erase(tag);
    }
  }
}

int EngineWorker::least_loaded_data_rank() const {
  std::vector<int64_t> load(static_cast<size_t>(ranks_.data_ranks), 0);
  for (const auto& [tag, p] : running_)
    if (p.job.params.max_new_tokens != 0) ++load[static_cast<size_t>(p.data_rank)];
  return static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());  // ties: the lowest
}

void EngineWorker::add_token(Pending& p, int32_t token, std::optional<TokenLogprob> logprob, std::string text) {
  Generation& g = *p.gen;
  const auto now = std::chrono::steady_clock::now();
  const bool first = g.s_.tokens.empty();  // this thread alone writes s_
  if (ServerMetrics* m = observers_.metrics) {
    if (first) m->observe_time_to_first_token(std::chrono::duration<double>(now - p.submitted).count());
    else m->observe_inter_token_latency(std::chrono::duration<double>(now - p.last_token).count());
    m->add_tokens(0, 1);
  }
  p.last_token = now;
  {
    std::lock_guard lock(g.m_);
    g.s_.tokens.push_back(token);
    if (logprob) g.s_.logprobs.push_back(std::move(*logprob));
    g.s_.text = std::move(text);
  }
  g.cv_.notify_all();
  std::lock_guard lock(m_);
  ++stats_.generated_tokens;
}

void EngineWorker::end_job(Running::iterator it, engine::FinishReason why, std::string text) {
  Generation& g = *it->second.gen;
  {
    std::lock_guard lock(g.m_);
    g.s_.text = std::move(text);
  }
  bool shutdown = false;
  if (why == engine::FinishReason::cancelled) {
    std::lock_guard lock(m_);
    ++stats_.cancelled;
    shutdown = stopping_ && !g.cancelled();  // ended by the server, not by its client leaving
  }
  if (shutdown) finish(g, why, kShuttingDown, 503);
  else finish(g, why);
  running_.erase(it);
}

void EngineWorker::collect_reports() {
  const std::vector<std::string> reports = parallel::gather_text(*ranks_.host, "");
  for (size_t r = 0; r < reports.size(); ++r) {
    if (reports[r].empty()) continue;  // this rank, and the ranks that do not lead a tensor group
    const int d = static_cast<int>(r) / ranks_.tensor_size;
    StepReport report = decode_step_report(reports[r]);
    queued_elsewhere_[static_cast<size_t>(d)] = report.queued;
    for (RequestEvent& e : report.events) {
      auto it = running_.find(e.tag);
      NM_CHECK(it != running_.end() && it->second.data_rank == d, "data rank {} reported request tag {}, not its own", d,
               e.tag);
      std::string text = it->second.gen->s_.text;  // this thread alone writes it
      apply_text_change(text, e);
      if (e.token) add_token(it->second, *e.token, std::move(e.logprob), text);
      if (!e.error.empty()) {  // its engine refused it (the routes check first: a last line, as in apply())
        finish(*it->second.gen, engine::FinishReason::cancelled, e.error);
        running_.erase(it);
      } else if (e.finished) {
        end_job(it, e.finish, std::move(text));
      }
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
  const bool reports = ranks_.data_ranks > 1;  // the other data ranks' tokens come in collect_reports()
  hooks.before_step = [&] {
    if (first_step) first_step = false;
    else {
      if (reports) collect_reports();
      apply(next_message(/*outer=*/false));
    }
    if (fault_) fault_();
    report_gauges();
  };
  hooks.on_token = [&](const engine::Result& r, std::span<const float> logits) {
    auto it = running_.find(r.tag);
    NM_CHECK(it != running_.end(), "a token for unknown request tag {}", r.tag);
    Pending& p = it->second;
    std::optional<TokenLogprob> logprob;
    if (p.job.top_logprobs >= 0) logprob = token_logprob(logits, r.tokens.back(), p.job.top_logprobs);
    add_token(p, r.tokens.back(), std::move(logprob), r.text);
    // In lockstep every rank ends a request at the same step: the one rank 0 listed it for.
    if (ranks_.host) return !lists(ending_, r.tag);
    std::lock_guard lock(m_);
    return !p.gen->cancelled() && !stopping_;
  };
  auto on_finish = [&](const engine::Result& r, const engine::EngineStats&) {
    auto it = running_.find(r.tag);
    NM_CHECK(it != running_.end(), "a result for unknown request tag {}", r.tag);
    end_job(it, r.finish, r.text);  // the final text: the last characters held back for UTF-8 are in
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
      if (reports) collect_reports();  // what the last step finished elsewhere (every rank reports once more)
      report_gauges();  // idle again
    } catch (const std::exception& e) {
      // The engine is left mid-run: fail what it held (the server answers 500) and keep serving.
      // Its state is unknown after this: fail what it held and whatever comes later (the routes
      // answer 500), rather than hang them. An engine_failed observer reports the failure itself
      // (a server of several ranks ends with it as its error line): logged here, it would read twice.
      if (!observers_.engine_failed) std::fprintf(stderr, "serve: the generation engine failed: %s\n", e.what());
      for (auto& [tag, p] : running_) finish(*p.gen, engine::FinishReason::cancelled, e.what());
      running_.clear();
      {
        std::lock_guard lock(m_);
        stopping_ = true;
        failure_ = fmt::format("the generation engine failed: {}", e.what());
      }
      if (observers_.engine_failed) observers_.engine_failed();
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
                   const engine::EngineOptions& engine_options, const WorkerRanks& ranks, StepFault fault) {
  engine::Engine engine(step, &tok, lockstep_options(engine_options, ranks));
  std::vector<uint64_t> ending;
  auto receive = [&] {
    std::string text;
    parallel::broadcast_text(*ranks.host, text);
    return decode_step_message(text);
  };
  // Expert parallelism: every rank takes part in rank 0's gather (collect_reports) before each
  // step and after each run; the first rank of another data rank's tensor group sends what its
  // engine did since the last (its jobs' top log-probs asked and the text rank 0 holds of each).
  const bool reports = ranks.data_ranks > 1;
  const bool reporter = reports && ranks.tensor_leader() && ranks.data_rank() != 0;
  struct Job {
    int64_t top_logprobs = -1;
    std::string sent;
  };
  std::map<uint64_t, Job> jobs;
  StepReport report;
  auto send_report = [&] {
    std::string text;
    if (reporter) {
      report.queued = static_cast<int64_t>(engine.queued());
      text = encode(report);
    }
    report.events.clear();
    parallel::gather_text(*ranks.host, text);
  };
  // What rank 0's apply() does, without the clients: the same forwards and the same queue.
  auto replay = [&](const StepMessage& m) {
    ending = m.cancelled;
    for (const AdmittedJob& a : m.admitted) {
      try {
        if (a.score_prompt) prompt_logprobs(net, a.request.prompt, a.top_logprobs, ranks.groups);
      } catch (const std::exception&) {  // rank 0 meets the same and answers its client
        continue;
      }
      if (!a.generates || a.data_rank != ranks.data_rank()) continue;
      try {
        engine.add(a.request);
        if (reporter) jobs[a.request.tag] = {a.request.wants_logits ? a.top_logprobs : -1, ""};
      } catch (const std::exception& e) {  // rank 0 answers its client with the reason
        if (!reporter) continue;
        RequestEvent refused;
        refused.tag = a.request.tag;
        refused.finished = true;
        refused.finish = engine::FinishReason::cancelled;
        refused.error = e.what();
        report.events.push_back(std::move(refused));
      }
    }
  };
  bool first_step = false;  // the run's first before_step replays nothing: the wake message did
  engine::RunHooks hooks;
  hooks.keep_results = false;
  hooks.before_step = [&] {
    if (first_step) first_step = false;
    else {
      if (reports) send_report();
      replay(receive());
    }
    if (fault) fault();
  };
  hooks.on_token = [&](const engine::Result& r, std::span<const float> logits) {
    if (reporter) {
      Job& j = jobs.at(r.tag);
      RequestEvent e;
      e.tag = r.tag;
      e.token = r.tokens.back();
      if (j.top_logprobs >= 0) e.logprob = token_logprob(logits, r.tokens.back(), j.top_logprobs);
      set_text_change(e, j.sent, r.text);
      j.sent = r.text;
      report.events.push_back(std::move(e));
    }
    return !lists(ending, r.tag);
  };
  auto on_finish = [&](const engine::Result& r, const engine::EngineStats&) {
    if (!reporter) return;
    auto it = jobs.find(r.tag);
    NM_CHECK(it != jobs.end(), "a result for unknown request tag {}", r.tag);
    RequestEvent e;
    e.tag = r.tag;
    e.finished = true;
    e.finish = r.finish;
    set_text_change(e, it->second.sent, r.text);
    report.events.push_back(std::move(e));
    jobs.erase(it);
  };
  try {
    while (true) {
      const StepMessage wake = receive();
      if (wake.stop) break;
      replay(wake);
      first_step = true;
      engine.run(on_finish, hooks);
      if (reports) send_report();
    }
  } catch (const std::exception& e) {  // not an InputError: this rank's alone, printed at once
    throw std::runtime_error(fmt::format("the generation engine failed: {}", e.what()));
  }
}

void EngineWorker::report_gauges() {
  if (!observers_.metrics) return;
  EngineGauges g;
  int64_t queued = static_cast<int64_t>(engine_.queued());
  for (int64_t q : queued_elsewhere_) queued += q;  // the other data ranks' (expert parallelism)
  {
    std::lock_guard lock(m_);
    g.waiting = static_cast<int64_t>(incoming_.size()) + queued;
  }
  g.running = static_cast<int64_t>(running_.size()) - queued;
  g.max_slots = step_.max_slots() * ranks_.data_ranks;
  const engine::EngineStats& e = engine_.stats();
  g.steps = e.steps, g.prefill_steps = e.prefill_steps;
  g.model_seconds = e.model_seconds, g.prefill_model_seconds = e.prefill_seconds;
  g.hook_seconds = e.hook_seconds, g.busy_seconds = e.seconds;
  if (observers_.state_bytes) std::tie(g.state_bytes_in_use, g.state_bytes_total) = observers_.state_bytes();
  observers_.metrics->set_engine(g);
}

}  // namespace nemotron::serve
