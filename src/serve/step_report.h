// What a data rank of an expert-parallel server (cli/inference_ranks.h) tells rank 0 after each
// step about the requests its engine runs: each token drawn (with its log-prob entry when the
// request asked), how the text changed, a finish and its reason, an admission its engine refused;
// and how many of its requests still wait for a slot. Before every step rank 0 gathers one report
// from each data rank (parallel::gather_text: one gather a step, whatever the requests) and
// streams their tokens to the clients as it streams its own engine's.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "serve/token_logprobs.h"

namespace nemotron::serve {

struct RequestEvent {
  uint64_t tag = 0;                     // the request's (engine::Request::tag, rank 0's key)
  std::optional<int32_t> token;         // a token drawn
  std::optional<TokenLogprob> logprob;  // its entry, for a request that asked for log-probs
  // The text from byte text_at on; the bytes before are what rank 0 already holds (a stop string
  // cuts the text back, so text_at may be short of what was sent before).
  size_t text_at = 0;
  std::string text;
  bool finished = false;
  engine::FinishReason finish = engine::FinishReason::length;
  std::string error;  // the engine refused the request: finished with no tokens
};

struct StepReport {
  int64_t queued = 0;  // requests of this data rank waiting for a slot (the server's gauge)
  std::vector<RequestEvent> events;
};

// The change from `sent` (what rank 0 holds) to `now`, into e.text_at and e.text.
void set_text_change(RequestEvent& e, const std::string& sent, const std::string& now);
// `text` (rank 0's) after e's change.
void apply_text_change(std::string& text, const RequestEvent& e);

std::string encode(const StepReport& r);
// The inverse (an internal message: a malformed one is a bug, not bad input).
StepReport decode_step_report(const std::string& text);

}  // namespace nemotron::serve
