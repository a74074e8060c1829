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

std::vector<TokenDraw> sample_rows(Context& ctx, const Tensor& logits, std::span<const RowSampling> rows) {
  OpScope scope(ctx, OpPhase::loss, __func__);
  const char* op = "sample_rows";
  NM_CHECK(logits.rank() == 2, "{}: logits must be [S, V], got {}", op, logits.shape().str());
  const int64_t S = logits.dim(0), V = logits.dim(1);
  NM_CHECK(static_cast<int64_t>(rows.size()) == S, "{}: {} rows of sampling parameters for {} rows of logits", op,
           rows.size(), S);
  NM_CHECK(V > 0, "{}: empty vocabulary", op);
  NM_CHECK(logits.dtype() == DType::f32 || logits.dtype() == DType::bf16, "{}: float32 or bfloat16 logits, got {}", op,
           dtype_name(logits.dtype()));
  for (const RowSampling& r : rows)
    NM_CHECK(std::isfinite(r.temperature) && r.temperature >= 0 && r.u >= 0 && r.u < 1,
             "{}: temperature {} (>= 0) and u {} (in [0, 1)) out of range", op, r.temperature, r.u);
  std::vector<TokenDraw> out(static_cast<size_t>(S));
  if (S == 0) return out;
#if NEMOTRON_CUDA
  if (logits.device().is_cuda()) {
    std::vector<double> params(static_cast<size_t>(2 * S));
    for (int64_t i = 0; i < S; ++i) {
      params[2 * i] = rows[i].temperature == 0 ? 0.0 : 1.0 / rows[i].temperature;
      params[2 * i + 1] = rows[i].u;
    }
    const Tensor p = Tensor::from_vector<double>({S, 2}, params).to(*ctx.backend);
    Tensor tokens = ctx.empty({S}, DType::i32), lps = ctx.empty({S, 2}, DType::f32);
    SampleRowsCudaArgs a;
    // raw(): data<T>() is for host tensors.
    a.logits = logits.raw(), a.params = static_cast<const double*>(p.raw());
    a.tokens = static_cast<int32_t*>(tokens.raw()), a.logprobs = static_cast<float*>(lps.raw());
    a.S = S, a.V = V, a.elem_size = static_cast<int>(dtype_size(logits.dtype()));
    NM_CUDA_CHECK(sample_rows_cuda(a, cuda::cuda_stream(ctx)));
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
