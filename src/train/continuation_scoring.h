// Scores continuations under a model, forward only: for each request (a prompt, then the
// continuation to score) the sum of log p(continuation token | everything before it), the number
// of continuation tokens, and how many of them are the model's argmax (lm-evaluation-harness's
// loglikelihood request: (logprob, is_greedy) with is_greedy = all of them). Requests are packed
// into rows of `row_tokens` with their sequence layout (mixer.h SequenceLayout), so each is
// scored as if alone, several per forward. Teacher-forced accuracy (SFT's proof), log-likelihood
// multiple choice and perplexity (eval) all read these numbers.
#pragma once
#include <cstdint>
#include <vector>

#include "model/hybrid_model.h"

namespace nemotron::train {

struct ContinuationRequest {
  std::vector<int32_t> tokens;  // prompt then continuation
  int64_t prompt_tokens = 0;    // continuation = tokens[prompt_tokens..]; >= 1 (the first token is never scored)
};

struct ContinuationScore {
  double logprob = 0;         // sum over the continuation's tokens
  int64_t tokens = 0;         // continuation tokens scored
  int64_t greedy_tokens = 0;  // of them, the argmax of the model's distribution
  bool greedy() const { return greedy_tokens == tokens; }
};

// One score per request, in order. A request longer than row_tokens + 1 tokens, or with
// prompt_tokens < 1 or no continuation, is an InputError naming its index.
std::vector<ContinuationScore> score_continuations(model::HybridModel& net, const std::vector<ContinuationRequest>& reqs,
                                                   int64_t row_tokens, int32_t pad_id);

}  // namespace nemotron::train
