// Log-probs as the OpenAI API reports them: for a token, log p under the model's unmodified
// distribution (log_softmax of the raw logits, what vLLM returns by default), and the k most likely
// alternatives at that position. The completions' echo scores a whole prompt in one forward.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "model/hybrid_model.h"

namespace nemotron::serve {

struct TokenLogprob {
  int32_t token = 0;
  double logprob = 0;                          // NaN for a prompt's first token (nothing predicts it)
  std::vector<std::pair<int32_t, double>> top;  // the k most likely, descending (ties: lower id first)
};

// `token` scored against the logits row that predicted it, with its top-k (k = 0: none).
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int64_t k);

// Every prompt token's log-prob given those before it (the first: NaN, no alternatives), from
// one forward of `net` over the prompt. Runs on the thread that owns the model. A model split over
// a tensor group (`groups`) runs it on every rank of the group at once.
std::vector<TokenLogprob> prompt_logprobs(model::HybridModel& net, const std::vector<int32_t>& prompt, int64_t k,
                                          const parallel::ProcessGroups* groups = nullptr);

}  // namespace nemotron::serve
