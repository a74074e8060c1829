// One next-token draw per row of logits [S, V], where the logits are: greedy (argmax, lowest id on
// ties) or plain temperature sampling (no top-k / top-p: those sort the vocabulary and stay on the
// host, engine/sampler.cpp). Row i's draw is the token at which the cumulative probability
// first exceeds the uniform u_i the caller drew (from its own counter-based stream, so the result
// is a pure function of the logits and u_i on any device). The generation engine calls this on
// the GPU so that a decode step brings back S tokens and log-probs instead of S x V logits.
//
// CPU reference (sample_row): every sum in double, exp in double, left to right over the vocabulary,
// the very code the host sampler runs. CUDA (sample_rows_cuda.h): exp in float, sums in double in
// per-thread chunks then in chunk order; tokens equal the reference's unless u_i falls within
// ~1e-7 of a boundary of the cumulative distribution, log-probs to ~1e-6.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/context.h"

namespace nemotron::ops {

struct TokenDraw {
  int32_t token = 0;
  // The GRPO generation log-prob (reference/pipeline-and-rl.md §2.7: NeMo RL asks vLLM for
  // `processed_logprobs`): log p of the token in the distribution it was drawn from, i.e. after
  // temperature (and, on the host sampler, top-k and top-p), renormalized. Greedy: the unmodified
  // log-softmax (vLLM treats temperature 0 as 1 for its log-probs).
  float logprob = 0;
  // log_softmax(unmodified logits)[token]: what a trainer computes from the raw logits at
  // temperature 1 (equal to `logprob` at temperature 1 without top-k/top-p).
  float raw_logprob = 0;
};

struct RowSampling {
  double temperature = 1.0;  // 0 = greedy
  double u = 0;              // the row's uniform draw in [0, 1) (unused when greedy)
};

// The CPU reference on one row of V float logits.
TokenDraw sample_row(const float* logits, int64_t V, double temperature, double u);

// Every row of `logits` [S, V] (float32 or bfloat16, on the CPU or a CUDA device), row i under
// rows[i]; the S draws come back to the host (one sync on a GPU).
std::vector<TokenDraw> sample_rows(Context& ctx, const Tensor& logits, std::span<const RowSampling> rows);

// sample_rows in two halves, for a decode step captured as a CUDA graph (engine/decode_graphs.h):
// the host packs the rows' parameters ([S, 2] float64: 1 / temperature or 0 for greedy, then u;
// checked as sample_rows checks them), the caller uploads them, and sample_rows_into draws on the
// device into tokens [S] int32 and logprobs [S, 2] float32 (logprob, raw_logprob) without reading
// anything back. CUDA tensors only.
std::vector<double> sample_rows_params(std::span<const RowSampling> rows);
void sample_rows_into(Context& ctx, const Tensor& logits, const Tensor& params, Tensor& tokens, Tensor& logprobs);

}  // namespace nemotron::ops
