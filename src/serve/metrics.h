// The server's figures for GET /metrics, in Prometheus' text exposition format (version 0.0.4):
// requests by HTTP status, prompt and generated tokens, requests waiting and running, batch
// occupancy, the decode state's memory (KV blocks, conv windows, SSM states) in use, the engine's
// steps and where their time went, and histograms of time to first token and of the time between a request's tokens. Names carry the
// `nemotron_` prefix and their unit (`_seconds`, `_bytes`, `_total` for counters), as
// Prometheus' naming rules ask. HTTP threads and the engine's worker update it; it is thread-safe.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace nemotron::serve {

// Cumulative buckets as Prometheus reads them: counts of observations <= each upper bound, +Inf last.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double x);
  // The `_bucket`, `_sum` and `_count` lines of metric `name`.
  void render(std::string& out, const std::string& name) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative; one more for +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

// What the engine's worker reports after each step.
struct EngineGauges {
  int64_t waiting = 0;  // requests not yet in a slot (queued in the worker or the engine)
  int64_t running = 0;  // sequences in slots
  int64_t max_slots = 0;
  // The decode state (KV blocks + Mamba states) the running sequences hold, and all of it.
  int64_t state_bytes_in_use = 0, state_bytes_total = 0;
  // The engine's counters since start (engine::EngineStats): steps, of which prefilling a prompt
  // (the rest only decode: a GPU replays their graph); seconds inside the model's steps, of
  // which the prefilling ones'; seconds in the server's per-token work on the engine thread.
  int64_t steps = 0, prefill_steps = 0;
  double model_seconds = 0, prefill_model_seconds = 0, hook_seconds = 0, busy_seconds = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void count_request(int http_status);
  void add_tokens(int64_t prompt, int64_t generated);
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void set_engine(const EngineGauges& g);
  std::string render() const;

 private:
  mutable std::mutex m_;
  std::map<int, int64_t> requests_by_status_;
  int64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  EngineGauges engine_;
  Histogram ttft_, itl_;
};

}  // namespace nemotron::serve
