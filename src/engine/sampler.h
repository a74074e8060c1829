// Next-token sampling as vLLM and Hugging Face define it: temperature (0 = greedy), then top-k,
// then top-p (nucleus: the smallest set of most likely tokens whose probability after temperature
// and top-k is >= p), renormalized, one draw. The uniform draw is value `index` of the Philox
// stream (seed, request id): a pure function of (seed, request id, token index), so batched and
// one-at-a-time generation, in any order, draw the same numbers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/sample_rows.h"

namespace nemotron::engine {

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy (argmax, lowest id on ties)
  double top_p = 1.0;        // in (0, 1]; 1 = off
  int64_t top_k = 0;         // 0 (or -1) = off
  int64_t max_new_tokens = 16;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;  // stop strings: generation ends when the text contains one
  uint64_t seed = 0;
};

// InputError naming `where` when a parameter is out of range.
void validate(const SamplingParams& p, const std::string& where);

// The token and its log-probs (fields documented in ops/sample_rows.h: `logprob` is GRPO's
// generation log-prob after temperature, top-k and top-p; `raw_logprob` the unmodified one).
using SampledToken = ops::TokenDraw;

// Whether rows under `p` are drawn by ops::sample_rows (greedy, or temperature alone), which runs
// where the logits are; top-k and top-p sort the vocabulary and run here on the host.
inline bool device_samplable(const SamplingParams& p) { return p.temperature == 0 || (p.top_k <= 0 && p.top_p >= 1); }

// ops::sample_rows's parameters for token `index` of request `request_id` (the uniform drawn from
// stream (p.seed, request_id) at `index`).
ops::RowSampling row_sampling(const SamplingParams& p, uint64_t request_id, uint64_t index);

// Samples from logits[0..V) under `p`, drawing from stream (p.seed, request_id) at `index`.
SampledToken sample_token(const float* logits, int64_t V, const SamplingParams& p, uint64_t request_id,
                          uint64_t index);

// The kept tokens and their renormalized probabilities (sorted by descending probability, ties by
// ascending id) under temperature > 0, top-k and top-p: the distribution sample_token draws from.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<double> probs;
};
Candidates sampling_candidates(const float* logits, int64_t V, const SamplingParams& p);

}  // namespace nemotron::engine
