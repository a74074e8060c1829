// Scores continuations under a model, forward only: for each request (a prompt, then the
// continuation to score) the sum of log p(continuation token | everything before it), the number
// of continuation tokens, and how many of them are the model's argmax (lm-evaluation-harness's
// loglikelihood request: (logprob, is_greedy) with is_greedy = all of them). Requests are packed
// into rows of `row_tokens` with their sequence layout (mixer.h SequenceLayout), so each is
// scored as if alone, several per row, and `rows_per_forward` rows go through one forward [B, T]
// (a GPU is idle on one short row). The log-softmax at the targets runs where the model lives
// (ops::softmax_cross_entropy on the scored rows' logits; float64 on the host, float32 on CUDA),
// so only one number per scored token comes back; the argmax test (greedy) needs the logits on
// the host and runs only when asked. Teacher-forced accuracy (SFT's proof), log-likelihood
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

struct ContinuationScoring {
  int64_t row_tokens = 2048;    // tokens per packed row (T)
  int64_t rows_per_forward = 1; // rows per forward (B)
  int32_t pad_id = 0;           // fills a row's unused columns
  bool count_greedy = true;     // greedy_tokens (copies every scored row's logits to the host); else 0
  // The run's process groups, which a tensor-parallel model's forward needs (every rank of its
  // tensor group scores the same requests); null: one process.
  const parallel::ProcessGroups* groups = nullptr;
};

// What a scoring call did (summed over calls by the caller): forwards, rows, and tokens.
struct ContinuationStats {
  int64_t forwards = 0;
  int64_t rows = 0;            // packed rows (a forward holds up to rows_per_forward)
  int64_t tokens = 0;          // request tokens fed (all but each request's last)
  int64_t scored_tokens = 0;   // continuation tokens scored
};

// One score per request, in order. A request longer than row_tokens + 1 tokens, or with
// prompt_tokens < 1 or no continuation, is an InputError naming its index.
std::vector<ContinuationScore> score_continuations(model::HybridModel& net, const std::vector<ContinuationRequest>& reqs,
                                                   const ContinuationScoring& how, ContinuationStats* stats = nullptr);
// One row per forward, greedy counted (SFT's teacher-forced accuracy).
inline std::vector<ContinuationScore> score_continuations(model::HybridModel& net,
                                                          const std::vector<ContinuationRequest>& reqs,
                                                          int64_t row_tokens, int32_t pad_id) {
  return score_continuations(net, reqs, ContinuationScoring{row_tokens, 1, pad_id, true});
}

}  // namespace nemotron::train
