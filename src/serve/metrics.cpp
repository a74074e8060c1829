#include "serve/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace nemotron::serve {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double x) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), x) - bounds_.begin());
  ++counts_[i];
  sum_ += x;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name) const {
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

// vLLM's buckets for the same two histograms (seconds).
ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0}),
      itl_({0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0}) {}

void ServerMetrics::count_request(int http_status) {
  std::lock_guard lock(m_);
  ++requests_by_status_[http_status];
}

void ServerMetrics::add_tokens(int64_t prompt, int64_t generated) {
  std::lock_guard lock(m_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}

void ServerMetrics::observe_time_to_first_token(double seconds) {
  std::lock_guard lock(m_);
  ttft_.observe(seconds);
}

void ServerMetrics::observe_inter_token_latency(double seconds) {
  std::lock_guard lock(m_);
  itl_.observe(seconds);
}

void ServerMetrics::set_engine(const EngineGauges& g) {
  std::lock_guard lock(m_);
  engine_ = g;
}

std::string ServerMetrics::render() const {
  std::lock_guard lock(m_);
  std::string out;
  auto head = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  head("nemotron_requests_total", "counter", "HTTP requests answered, by status code.");
  for (const auto& [status, n] : requests_by_status_)
    out += fmt::format("nemotron_requests_total{{status=\"{}\"}} {}\n", status, n);
  head("nemotron_prompt_tokens_total", "counter", "Prompt tokens of the requests admitted to the engine.");
  out += fmt::format("nemotron_prompt_tokens_total {}\n", prompt_tokens_);
  head("nemotron_generation_tokens_total", "counter", "Tokens generated.");
  out += fmt::format("nemotron_generation_tokens_total {}\n", generated_tokens_);
  head("nemotron_requests_waiting", "gauge", "Generation requests waiting for a slot.");
  out += fmt::format("nemotron_requests_waiting {}\n", engine_.waiting);
  head("nemotron_requests_running", "gauge", "Sequences being generated (slots in use).");
  out += fmt::format("nemotron_requests_running {}\n", engine_.running);
  head("nemotron_batch_slots", "gauge", "Slots the engine batches at most (--max-slots).");
  out += fmt::format("nemotron_batch_slots {}\n", engine_.max_slots);
  head("nemotron_batch_occupancy_ratio", "gauge", "Slots in use over slots (0..1).");
  const double occupancy =
      engine_.max_slots > 0 ? static_cast<double>(engine_.running) / static_cast<double>(engine_.max_slots) : 0.0;
  out += fmt::format("nemotron_batch_occupancy_ratio {}\n", occupancy);
  head("nemotron_decode_state_bytes_in_use", "gauge",
       "Decode state (KV cache blocks, Mamba conv and SSM states) held by running sequences.");
  out += fmt::format("nemotron_decode_state_bytes_in_use {}\n", engine_.state_bytes_in_use);
  head("nemotron_decode_state_bytes", "gauge", "Decode state allocated in all (KV pool and every slot's Mamba state).");
  out += fmt::format("nemotron_decode_state_bytes {}\n", engine_.state_bytes_total);
  head("nemotron_engine_steps_total", "counter",
       "Engine steps, by kind: prefill (the step prefilled a prompt beside the running sequences' tokens) or decode.");
  out += fmt::format("nemotron_engine_steps_total{{kind=\"prefill\"}} {}\n", engine_.prefill_steps);
  out += fmt::format("nemotron_engine_steps_total{{kind=\"decode\"}} {}\n", engine_.steps - engine_.prefill_steps);
  head("nemotron_engine_model_seconds_total", "counter", "Time inside the model's steps, by kind of step.");
  out += fmt::format("nemotron_engine_model_seconds_total{{kind=\"prefill\"}} {}\n", engine_.prefill_model_seconds);
  out += fmt::format("nemotron_engine_model_seconds_total{{kind=\"decode\"}} {}\n",
                     engine_.model_seconds - engine_.prefill_model_seconds);
  head("nemotron_engine_hook_seconds_total", "counter",
       "Time in the server's per-token work on the engine thread (streaming, detokenizing, admitting); with "
       "--async-scheduling mostly while a step is in flight.");
  out += fmt::format("nemotron_engine_hook_seconds_total {}\n", engine_.hook_seconds);
  head("nemotron_engine_busy_seconds_total", "counter", "Time the engine ran steps (not idle waiting for requests).");
  out += fmt::format("nemotron_engine_busy_seconds_total {}\n", engine_.busy_seconds);
  head("nemotron_time_to_first_token_seconds", "histogram",
       "From a request's arrival at the engine to its first generated token.");
  ttft_.render(out, "nemotron_time_to_first_token_seconds");
  head("nemotron_inter_token_latency_seconds", "histogram", "Between consecutive generated tokens of one request.");
  itl_.render(out, "nemotron_inter_token_latency_seconds");
  return out;
}

}  // namespace nemotron::serve
