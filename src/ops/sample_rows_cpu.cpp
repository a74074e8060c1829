// CPU reference of sample_rows.h, and the CUDA entry's checks and transfers.
#include <algorithm>
#include <cmath>

#include "backend/cpu/parallel.h"
#include "core/dtype.h"
#include "core/op_profiler.h"
#include "ops/sample_rows.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/sample_rows_cuda.h"
#endif

namespace nemotron::ops {

namespace {

// log-sum-exp of the raw logits, in double.
double log_sum_exp(const float* z, int64_t V) {
  double m = -INFINITY;
  for (int64_t v = 0; v < V; ++v) m = std::max(m, static_cast<double>(z[v]));
  double s = 0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(z[v] - m);
  return m + std::log(s);
}

}  // namespace

TokenDraw sample_row(const float* z, int64_t V, double temperature, double u) {
  NM_CHECK(V > 0, "sample_row: empty vocabulary");
  TokenDraw out;
  if (temperature == 0) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (z[v] > z[best]) best = v;
    out.token = static_cast<int32_t>(best);
    out.logprob = out.raw_logprob = static_cast<float>(z[best] - log_sum_exp(z, V));
    return out;
  }
  // The candidates are every id in id order: draw from the weights directly, with no copy of the
  // vocabulary. At temperature 1 the weights' sum is the raw log-sum-exp's as well.
  const double inv_t = 1.0 / temperature;
  double m = -INFINITY;
  for (int64_t v = 0; v < V; ++v) m = std::max(m, static_cast<double>(z[v]));
  double total = 0;
  for (int64_t v = 0; v < V; ++v) total += std::exp((z[v] - m) * inv_t);
  // Rounding can leave the cumulative sum just below u (u near 1): the draw is then the last id
  // of non-zero weight, never one of probability 0 (a tail of underflowed weights, log-prob -inf).
  int64_t pick = -1, last_weighted = 0;
  double cum = 0, w_pick = 0, w_last = 0;
  for (int64_t v = 0; v < V; ++v) {
    const double w = std::exp((z[v] - m) * inv_t);
    if (w > 0) last_weighted = v, w_last = w;
    cum += w / total;
    if (u < cum) {
      pick = v, w_pick = w;
      break;
    }
  }
  if (pick < 0) pick = last_weighted, w_pick = w_last;
  out.token = static_cast<int32_t>(pick);
  out.logprob = static_cast<float>(std::log(w_pick / total));
  const double raw_lse = inv_t == 1.0 ? m + std::log(total) : log_sum_exp(z, V);
  out.raw_logprob = static_cast<float>(z[pick] - raw_lse);
  return out;
}

namespace {

void check_logits(const Tensor& logits, int64_t S, const char* op) {
  NM_CHECK(logits.rank() == 2, "{}: logits must be [S, V], got {}", op, logits.shape().str());
  NM_CHECK(logits.dim(0) == S, "{}: {} rows of sampling parameters for {} rows of logits", op, S, logits.dim(0));
  NM_CHECK(logits.dim(1) > 0, "{}: empty vocabulary", op);
  NM_CHECK(logits.dtype() == DType::f32 || logits.dtype() == DType::bf16, "{}: float32 or bfloat16 logits, got {}", op,
           dtype_name(logits.dtype()));
}

}  // namespace

std::vector<double> sample_rows_params(std::span<const RowSampling> rows) {
  std::vector<double> params(2 * rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    NM_CHECK(std::isfinite(rows[i].temperature) && rows[i].temperature >= 0 && rows[i].u >= 0 && rows[i].u < 1,
             "sample_rows: temperature {} (>= 0) and u {} (in [0, 1)) out of range", rows[i].temperature, rows[i].u);
    params[2 * i] = rows[i].temperature == 0 ? 0.0 : 1.0 / rows[i].temperature;
    params[2 * i + 1] = rows[i].u;
  }
  return params;
}

void sample_rows_into(Context& ctx, const Tensor& logits, const Tensor& params, Tensor& tokens, Tensor& logprobs) {
  OpScope scope(ctx, OpPhase::loss, __func__);
  const char* op = "sample_rows_into";
  const int64_t S = params.numel() / 2;
  check_logits(logits, S, op);
  NM_CHECK(params.dtype() == DType::f64 && params.numel() == 2 * S && tokens.dtype() == DType::i32 &&
               tokens.numel() == S && logprobs.dtype() == DType::f32 && logprobs.numel() == 2 * S,
           "{}: params {}, tokens {}, logprobs {} for {} rows", op, params.describe(), tokens.describe(),
           logprobs.describe(), S);
#if NEMOTRON_CUDA
  if (logits.device().is_cuda()) {
    SampleRowsCudaArgs a;
    // raw(): data<T>() is for host tensors.
    a.logits = logits.raw(), a.params = static_cast<const double*>(params.raw());
    a.tokens = static_cast<int32_t*>(tokens.raw()), a.logprobs = static_cast<float*>(logprobs.raw());
    a.S = S, a.V = logits.dim(1), a.elem_size = static_cast<int>(dtype_size(logits.dtype()));
    NM_CUDA_CHECK(sample_rows_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  throw Error(fmt::format("{}: CUDA tensors only (the host samples with sample_rows), got {}", op,
                          logits.device().str()));
}

std::vector<TokenDraw> sample_rows(Context& ctx, const Tensor& logits, std::span<const RowSampling> rows) {
  OpScope scope(ctx, OpPhase::loss, __func__);
  const char* op = "sample_rows";
  const int64_t S = static_cast<int64_t>(rows.size());
  check_logits(logits, S, op);
  const int64_t V = logits.dim(1);
  const std::vector<double> params = sample_rows_params(rows);
  std::vector<TokenDraw> out(static_cast<size_t>(S));
  if (S == 0) return out;
#if NEMOTRON_CUDA
  if (logits.device().is_cuda()) {
    const Tensor p = Tensor::from_vector<double>({S, 2}, params).to(*ctx.backend);
    Tensor tokens = ctx.empty({S}, DType::i32), lps = ctx.empty({S, 2}, DType::f32);
    sample_rows_into(ctx, logits, p, tokens, lps);
    const Tensor ht = tokens.to(host_backend()), hl = lps.to(host_backend());  // synchronises
    for (int64_t i = 0; i < S; ++i)
      out[i] = {ht.data<int32_t>()[i], hl.data<float>()[2 * i], hl.data<float>()[2 * i + 1]};
    return out;
  }
#endif
  NM_CHECK(logits.device().is_cpu(), "{}: no kernel for {} tensors", op, logits.device().str());
  cpu::parallel_for(S, [&](int64_t i) {
    const float* row = nullptr;
    std::vector<float> widened;
    if (logits.dtype() == DType::f32) {
      row = logits.data<float>() + i * V;
    } else {
      const uint16_t* h = static_cast<const uint16_t*>(logits.raw()) + i * V;
      widened.resize(static_cast<size_t>(V));
      for (int64_t v = 0; v < V; ++v) widened[static_cast<size_t>(v)] = bf16_to_f32(h[v]);
      row = widened.data();
    }
    out[static_cast<size_t>(i)] = sample_row(row, V, rows[i].temperature, rows[i].u);
  }, cpu::grain_for(V));
  return out;
}

}  // namespace nemotron::ops
