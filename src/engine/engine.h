// The generation engine: a queue of requests run over a StepModel with continuous batching. Each
// step makes one extend call: newly admitted prompts are prefilled and every running sequence
// decodes one token. A sequence that finishes (stop token, stop string, max_new_tokens, the model's
// max_seq_len) releases its slot at once and the next step refills it from the queue. A request
// the model has no memory for (can_admit false) waits in the queue until a running one finishes.
#pragma once
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "engine/sampler.h"
#include "engine/step_model.h"

namespace nemotron::engine {

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams params;
  // Keys the sampling stream with params.seed; unset: the engine numbers requests 0, 1, 2, ... in
  // the order they were added.
  std::optional<uint64_t> id;
  uint64_t tag = 0;  // the caller's, copied to Result::tag (ids may repeat: requests keyed alike draw alike)
  // RunHooks::on_token gets this request's logits row (a server's top log-probs): its steps then
  // bring [S, V] logits to the host. Otherwise on_token gets an empty row, and a step whose rows
  // all sample on the device (StepModel::samples_on_device) brings back only the drawn tokens.
  bool wants_logits = false;
};

enum class FinishReason { stop_token, stop_string, length, max_seq_len, cancelled };
// "stop_token", "stop_string", "length" (max_new_tokens), "max_seq_len", "cancelled" (RunHooks::on_token).
const char* finish_reason_name(FinishReason r);

struct Result {
  uint64_t id = 0;
  uint64_t tag = 0;  // Request::tag
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;        // generated, the stop token included
  std::vector<float> logprobs;        // per token: SampledToken::logprob (GRPO's generation log-probs)
  std::vector<float> raw_logprobs;    // per token: log_softmax of the unmodified logits
  FinishReason finish = FinishReason::length;
  std::string text;  // detokenized, special tokens skipped, cut before a stop string; "" without a tokenizer
};

struct EngineStats {
  int64_t requests = 0, steps = 0, prefill_tokens = 0, decode_tokens = 0;  // decode = generated tokens
  // Prompt tokens not prefilled because another request's prefill of the same prompt was shared
  // (EngineOptions::prefix_sharing); prefill_tokens counts only those computed.
  int64_t shared_prefill_tokens = 0;
  int64_t peak_running = 0;  // most sequences in one step
  // Steps taken with nothing to decode while other engines of the model's group had work
  // (StepModel::idle_step; expert parallelism).
  int64_t idle_steps = 0;
  int64_t prefill_steps = 0;  // of steps, those that prefilled a prompt (the rest only decode)
  double seconds = 0, model_seconds = 0;  // wall time of run(); of which inside extend (and fork)
  double prefill_seconds = 0;             // of model_seconds, the steps that prefilled a prompt
  // Of seconds, in the caller's RunHooks and on_finish and the detokenizing done for them (with
  // EngineOptions::async_scheduling, mostly while a step is in flight, so not in model_seconds).
  double hook_seconds = 0;
  double tokens_per_second() const { return seconds > 0 ? decode_tokens / seconds : 0; }  // generated
};

// For a caller that feeds a run while it goes and watches each token (the HTTP server, serve/):
// requests added in before_step join the running batch at the next step (continuous batching
// across arrivals), and on_token can stream and cancel.
struct RunHooks {
  // Called before each step; may add() requests.
  std::function<void()> before_step;
  // After each sampled token (the last one too, before on_finish), with the result so far (its
  // text detokenized up to this token, a stop string cut) and, for a request with wants_logits,
  // the unmodified logits [V] the token was drawn from (else an empty span). Returning false
  // cancels the request: it finishes at once with FinishReason::cancelled (unless this token
  // finished it anyway) and frees its slot.
  std::function<bool(const Result&, std::span<const float> logits)> on_token;
  // false: run() keeps no results (the caller takes them in on_finish), so a long-running caller's
  // memory does not grow with the requests it served.
  bool keep_results = true;
};

struct EngineOptions {
  // Requests admitted together with the same prompt (the G generations of a GRPO prompt, a
  // server's n > 1) prefill it once: the others' slots are forked from it (StepModel::fork) and
  // draw their first tokens from its logits row. Each keeps its own sampling stream, and a fork
  // continues exactly as its source would, so the results are those without sharing to the
  // rounding of a batch change: without sharing the G copies of a prompt are G rows of one packed
  // prefill, and a GEMM may round a row by its position in the batch (OpenBLAS's edge tiles on
  // the CPU, cuBLAS's choice of algorithm by row count on a GPU), so even the copies differ from
  // one another in the last bits. Same tokens (tests/engine/prefix_sharing_test.cpp), log-probs
  // to float rounding. Off, or on a model without fork: every request prefills its own prompt.
  bool prefix_sharing = true;
  // vLLM's scheduler_delay_factor: while sequences are decoding, queued requests are admitted only
  // once the oldest has waited longer than this factor times the last prefilling step's time, so
  // that arrivals spread over steps (a server's clients) are prefilled together rather than each
  // adding a prefill to almost every decode step. 0: admit at every step (batch callers, GRPO).
  double admission_delay_factor = 0;
  // Engines in lockstep (the ranks of a tensor-parallel group) must admit at the same steps, but
  // the delay above is a clock decision: when set, each step that weighs it passes its own decision
  // here and follows the one returned (rank 0's, broadcast). Unset: its own.
  std::function<bool(bool delayed)> agree_delay;
  // vLLM's async_scheduling: the host work of a step's tokens (RunHooks::on_token, the
  // detokenizing for it, on_finish) runs while the next step is in flight on the model
  // (StepModel::launch_and_sample / collect_draws: a GPU decode step replaying its graph), so a
  // server's per-token work no longer adds to every step. The tokens are the same; a request's
  // hooks and its on_finish come one step later, and one that on_token cancels ends at its next
  // step (the token that step drew for it is dropped), as it would with the hooks run at once.
  bool async_scheduling = false;
};

class Engine {
 public:
  // `tokenizer` (may be null: no text, stop strings unsupported) must outlive the engine.
  Engine(StepModel& model, const data::Tokenizer* tokenizer = nullptr, EngineOptions options = {});

  // Queues a request (InputError, naming it, for an empty prompt, a token outside the vocabulary,
  // a prompt that leaves no room below max_seq_len, bad sampling parameters). Returns its id.
  uint64_t add(Request r);
  // Runs until the queue is empty; results in the order the requests were added. `on_finish` is
  // called as each one finishes (in finishing order), with the stats so far.
  using FinishCallback = std::function<void(const Result&, const EngineStats&)>;
  std::vector<Result> run(const FinishCallback& on_finish = {}, const RunHooks& hooks = {});
  const EngineStats& stats() const { return stats_; }
  // Requests added and not yet in a slot (for the server's queue-length gauge).
  size_t queued() const { return queue_.size(); }

 private:
  struct Sequence;
  void detokenize(Sequence& s, bool final);
  std::optional<FinishReason> check_finish(Sequence& s);

  StepModel& model_;
  const data::Tokenizer* tok_;
  EngineOptions options_;
  struct Queued {
    size_t position;  // in run()'s results
    Request request;
    std::chrono::steady_clock::time_point at;  // when add() queued it
  };
  std::deque<Queued> queue_;
  uint64_t next_id_ = 0;
  size_t added_ = 0;
  EngineStats stats_;
};

}  // namespace nemotron::engine
