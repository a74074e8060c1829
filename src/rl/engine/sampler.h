// Next-token sampling as vLLM and Hugging Face define it: temperature (0 = greedy), then top-k,
// then top-p (nucleus: the smallest set of most likely tokens whose probability after temperature
// and top-k is >= p), renormalized, one draw. The uniform draw is value `index` of the Philox
// stream (seed, request id): a pure function of (seed, request id, token index), so batched and
// one-at-a-time generation, in any order, draw the same numbers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nemotron::rl {

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

struct SampledToken {
  int32_t token = 0;
  // The GRPO generation log-prob (reference/pipeline-and-rl.md §2.7: NeMo RL asks vLLM for
  // `processed_logprobs`): log p of the token in the distribution it was drawn from, i.e. after
  // temperature, top-k and top-p, renormalized. Greedy: the unmodified log-softmax (vLLM treats
  // temperature 0 as 1 for its log-probs).
  float logprob = 0;
  // log_softmax(unmodified logits)[token]: what a trainer computes from the raw logits at
  // temperature 1 (equal to `logprob` at temperature 1 without top-k/top-p).
  float raw_logprob = 0;
};

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

}  // namespace nemotron::rl
