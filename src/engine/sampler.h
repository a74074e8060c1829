// Next-token sampling as vLLM and Hugging Face define it: OpenAI's logit adjustments first (logit
// bias, then presence and frequency penalties over the tokens generated so far), then temperature
// (0 = greedy), then top-k, then top-p (nucleus: the smallest set of most likely tokens whose
// probability after temperature and top-k is >= p), renormalized, one draw. The uniform draw is
// value `index` of the Philox stream (seed, request id): a pure function of (seed, request id,
// token index), so batched and one-at-a-time generation, in any order, draw the same numbers.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <utility>
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
  // OpenAI's adjustments (platform.openai.com/docs/api-reference: logit_bias, presence_penalty,
  // frequency_penalty): logit[j] += bias[j] - c[j] * frequency_penalty - (c[j] > 0) * presence_penalty,
  // c[j] = how often token j was generated so far in this sequence (the prompt does not count, as in
  // vLLM). Log-probs reported as "raw" stay those of the unmodified logits.
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias in [-100, 100])
  double presence_penalty = 0, frequency_penalty = 0;  // each in [-2, 2]
  bool adjusts_logits() const { return !logit_bias.empty() || presence_penalty != 0 || frequency_penalty != 0; }
};

// InputError naming `where` when a parameter is out of range (a logit_bias id outside [0, V) too,
// when V > 0).
void validate(const SamplingParams& p, const std::string& where, int64_t V = 0);

// logits[0..V) with p's logit bias and penalties applied for a sequence that has generated
// `generated` so far (a copy; the caller's row is left alone).
std::vector<float> adjusted_logits(const float* logits, int64_t V, const SamplingParams& p,
                                   std::span<const int32_t> generated);

// The token and its log-probs (fields documented in ops/sample_rows.h: `logprob` is GRPO's
// generation log-prob after temperature, top-k and top-p; `raw_logprob` the unmodified one).
using SampledToken = ops::TokenDraw;

// Whether rows under `p` are drawn by ops::sample_rows (greedy, or temperature alone), which runs
// where the logits are; top-k and top-p sort the vocabulary, and logit adjustments need the
// sequence's tokens: those rows run here on the host (one implementation of the math).
inline bool device_samplable(const SamplingParams& p) {
  return !p.adjusts_logits() && (p.temperature == 0 || (p.top_k <= 0 && p.top_p >= 1));
}

// ops::sample_rows's parameters for token `index` of request `request_id` (the uniform drawn from
// stream (p.seed, request_id) at `index`).
ops::RowSampling row_sampling(const SamplingParams& p, uint64_t request_id, uint64_t index);

// Samples from logits[0..V) under `p`, drawing from stream (p.seed, request_id) at `index`;
// `generated` (the sequence's tokens so far) feeds the penalties.
SampledToken sample_token(const float* logits, int64_t V, const SamplingParams& p, uint64_t request_id,
                          uint64_t index, std::span<const int32_t> generated = {});

// The kept tokens and their renormalized probabilities (sorted by descending probability, ties by
// ascending id) under temperature > 0, top-k and top-p: the distribution sample_token draws from.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<double> probs;
};
Candidates sampling_candidates(const float* logits, int64_t V, const SamplingParams& p);

}  // namespace nemotron::engine
