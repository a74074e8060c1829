// One thread owns the model and the generation engine; HTTP threads hand it jobs and read each
// job's progress from its Generation. Jobs that arrive while the engine runs join the running
// batch at its next step (continuous batching across requests); a job's tokens, their log-probs
// and its text appear as they are generated (for streaming); a cancelled job (its client went
// away) finishes at the next step and frees its slot without touching the others. A job the
// server's shutdown ends fails with status 503 (no finish_reason: OpenAI's set has none for it).
// The worker reports tokens, latencies, queue and memory to ServerMetrics (serve/metrics.h).
// Under tensor parallelism rank 0's worker broadcasts what each step admits and cancels
// (serve/step_message.h) and the other ranks replay it in follow_worker(), so that every rank's
// engine runs the same steps; a cancellation then takes effect at the step after it is seen.
// Under expert parallelism each admitted job goes to one data rank (the one running the fewest;
// the choices of one prompt, submitted together, all go to one, as vLLM keeps a request's n
// samples on one engine: they share the prompt's prefill);
// all engines step in lockstep (one with no work steps idle), and before each step, and once after
// each run, rank 0 gathers the other data ranks' tokens and finishes (serve/step_report.h).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "data/tokenizer.h"
#include "engine/engine.h"
#include "model/hybrid_model.h"
#include "parallel/communicator.h"
#include "serve/metrics.h"
#include "serve/step_message.h"
#include "serve/step_report.h"
#include "serve/token_logprobs.h"

namespace nemotron::serve {

struct GenerationJob {
  std::vector<int32_t> prompt;
  engine::SamplingParams params;    // max_new_tokens 0: only score the prompt (echo)
  uint64_t stream_id = 0;       // keys the sampling stream with params.seed (engine::Request::id)
  int64_t top_logprobs = -1;    // < 0: no log-probs; else per generated token with its top-k
  bool score_prompt = false;    // the prompt tokens' log-probs (with top_logprobs alternatives)
};

// A job's progress: what the worker has produced so far.
struct GenerationState {
  std::vector<int32_t> tokens;             // generated so far
  std::vector<TokenLogprob> logprobs;      // per generated token, when the job asked
  std::vector<TokenLogprob> prompt_logprobs;
  std::string text;                        // detokenized so far (final once finished)
  bool finished = false;
  engine::FinishReason finish = engine::FinishReason::length;
  std::string error;                       // the engine refused the job (finished, no tokens)
  int error_status = 500;                  // with `error`: 503 when the server is shutting down
};

class Generation {
 public:
  // Blocks until more than `seen` tokens exist or the job finished; returns the state with
  // tokens and logprobs from `seen` on (the text whole).
  GenerationState wait(size_t seen) const;
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class EngineWorker;
  mutable std::mutex m_;
  mutable std::condition_variable cv_;
  GenerationState s_;
  std::atomic<bool> cancelled_{false};
};

struct WorkerStats {
  int64_t requests = 0, prompt_tokens = 0, generated_tokens = 0, cancelled = 0;
  // Under expert parallelism: the generating requests each data rank was given.
  std::vector<int64_t> requests_by_data_rank;
};

// Where the worker reports (all optional). `state_bytes` runs on the worker thread after each
// step: the decode state's bytes held by running sequences, and in all. `engine_failed` runs on
// the worker thread once the engine threw and the jobs it held failed with the error (500): a
// server of several ranks ends then (the other ranks wait on this one's collectives) and reports
// failure(); without it the worker logs the failure itself on stderr.
struct WorkerObservers {
  ServerMetrics* metrics = nullptr;
  std::function<std::pair<int64_t, int64_t>()> state_bytes;
  std::function<void()> engine_failed;
};

// A test's fault (NEMOTRON_TEST_ENGINE_FAIL, cli/serve_command.cpp): runs on the engine's thread
// before each of this rank's engine steps, once the step's message is exchanged; what it throws is
// an engine failure on this rank alone, mid-run, as a real one would be.
using StepFault = std::function<void()>;

// A model split over several ranks: rank 0's worker sends each step's StepMessage over `host` (a
// host-memory communicator of every rank), and the echo forward runs with `groups`. Under expert
// parallelism the world is `data_ranks` tensor groups of `tensor_size` ranks (world rank r is in
// data rank r / tensor_size), each data rank running its own engine over its share of the jobs.
// Default: one process.
struct WorkerRanks {
  parallel::Communicator* host = nullptr;
  const parallel::ProcessGroups* groups = nullptr;
  int data_ranks = 1, tensor_size = 1, rank = 0;
  int data_rank() const { return rank / tensor_size; }
  bool tensor_leader() const { return rank % tensor_size == 0; }
};

// Run first on the worker thread (optional): a GPU model binds its device there
// (train::bind_to_calling_thread), since the thread that loaded it is not the one that runs it.
using ThreadStart = std::function<void()>;

class EngineWorker {
 public:
  // `step` runs `net` (the echo forward uses `net` directly); all must outlive the worker.
  EngineWorker(engine::StepModel& step, model::HybridModel& net, const data::Tokenizer& tok,
               WorkerObservers observers = {}, ThreadStart thread_start = {}, engine::EngineOptions engine_options = {},
               WorkerRanks ranks = {}, StepFault fault = {});
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  std::shared_ptr<Generation> submit(GenerationJob job);
  // A request's jobs at once (its choices): those with the same prompt run on one data rank.
  std::vector<std::shared_ptr<Generation>> submit(std::vector<GenerationJob> jobs);
  // Cancels what is queued or running and joins the thread; submit() afterwards finishes jobs at
  // once with an error.
  void stop();
  WorkerStats stats() const;
  // Why the engine stopped serving ("the generation engine failed: ..."); empty while it serves
  // or after a plain stop().
  std::string failure() const;

 private:
  struct Pending {
    GenerationJob job;
    std::shared_ptr<Generation> gen;
    std::chrono::steady_clock::time_point submitted, last_token;
    int data_rank = 0;  // whose engine generates it (expert parallelism)
    uint64_t group = 0;  // jobs submitted together with the same prompt share it (and a data rank)
  };
  using Running = std::map<uint64_t, Pending>;
  void loop();
  // The data rank a new generating job goes to: the one with the fewest jobs in running_.
  int least_loaded_data_rank() const;
  // Under expert parallelism (a collective of every rank, as follow_worker's send): the other
  // data ranks' reports since the last, applied to their jobs as this engine's hooks apply its own.
  void collect_reports();
  // A job's token (from this engine or a data rank's report): its metrics, tokens, log-prob and text.
  void add_token(Pending& p, int32_t token, std::optional<TokenLogprob> logprob, std::string text);
  // A job's end with its final text; the job leaves running_.
  void end_job(Running::iterator it, engine::FinishReason why, std::string text);
  // On the worker thread, before each step: the incoming jobs become this step's admissions (the
  // ones whose client already left finish here), the running ones to end are listed, and the
  // message goes to the other ranks; then run() applies it.
  StepMessage next_message(bool outer);
  void apply(const StepMessage& m);
  void report_gauges();   // on the worker thread
  static void finish(Generation& g, engine::FinishReason why, const std::string& error = "", int status = 500);

  engine::StepModel& step_;
  model::HybridModel& net_;
  const data::Tokenizer& tok_;
  WorkerObservers observers_;
  ThreadStart thread_start_;
  WorkerRanks ranks_;
  StepFault fault_;
  engine::Engine engine_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<Pending> incoming_;
  bool stopping_ = false;
  std::string failure_;  // set when the engine threw: every later job fails with it
  WorkerStats stats_;
  // Worker thread only: running jobs by their engine::Request::tag (under expert parallelism those
  // of every data rank), and each other data rank's queued count at its last report.
  Running running_;
  std::vector<int64_t> queued_elsewhere_;
  std::vector<uint64_t> ending_;  // the tags the current step cancels (lockstep only)
  uint64_t next_tag_ = 0;
  uint64_t next_group_ = 0;  // under m_
  std::thread thread_;
};

// The other ranks of a tensor- or expert-parallel server (no HTTP): replays rank 0's step messages
// on this rank's engine (each admitted prompt scored when asked, each request of this data rank
// queued with rank 0's tag, each listed cancellation at its step) until rank 0 sends stop; the
// first rank of another data rank's tensor group reports its engine's tokens and finishes to rank
// 0 before each step and after each run. Runs on the calling thread; an engine failure throws
// ("the generation engine failed: ..."): the caller ends every rank with it (the others wait in
// this rank's collectives). `engine_options` must be rank 0's (the admission delay then follows
// rank 0's clock).
void follow_worker(engine::StepModel& step, model::HybridModel& net, const data::Tokenizer& tok,
                   const engine::EngineOptions& engine_options, const WorkerRanks& ranks, StepFault fault = {});

}  // namespace nemotron::serve
