// CPU reference for the sequence aux loss: one token per loop iteration, sums in float64; the
// top-k is a repeated strict argmax, so the lowest index wins ties.
#include <vector>

#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/moe_aux_loss.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/moe_aux_loss_cuda.h"
#endif

namespace nemotron::ops {

namespace {

constexpr double kEps = 1e-20;

template <class T>
void forward_ref(const T* s, int64_t B, int64_t S, int64_t E, int64_t K, T* counts, T* psum) {
  std::vector<double> c(static_cast<size_t>(B * E), 0.0), p(static_cast<size_t>(B * E), 0.0);
  std::vector<char> taken(static_cast<size_t>(E));
  for (int64_t n = 0; n < B * S; ++n) {
    const T* row = s + n * E;
    const int64_t b = n / S;
    double z = 0;
    for (int64_t i = 0; i < E; ++i) z += static_cast<double>(row[i]);
    z = K > 1 ? z + kEps : 1.0;
    for (int64_t i = 0; i < E; ++i) p[b * E + i] += static_cast<double>(row[i]) / z;
    std::fill(taken.begin(), taken.end(), 0);
    for (int64_t j = 0; j < K; ++j) {
      int64_t arg = -1;
      for (int64_t i = 0; i < E; ++i)
        if (!taken[i] && (arg < 0 || row[i] > row[arg])) arg = i;
      taken[arg] = 1;
      c[b * E + arg] += 1.0;
    }
  }
  for (int64_t k = 0; k < B * E; ++k) counts[k] = static_cast<T>(c[k]), psum[k] = static_cast<T>(p[k]);
}

// g_i = w c_bi = dL/dp_ti; through p = s / Z: ds_j = g_j / Z - (sum_i g_i s_i) / Z^2; through the
// sigmoid: dlogit_j = ds_j s_j (1 - s_j).
template <class T>
void backward_ref(const T* s, int64_t N, int64_t S, int64_t E, int64_t K, double w, const T* counts, T* dlogits) {
  for (int64_t n = 0; n < N; ++n) {
    const T* row = s + n * E;
    const T* c = counts + (n / S) * E;
    double z = 0, dot = 0;
    for (int64_t i = 0; i < E; ++i)
      z += static_cast<double>(row[i]), dot += w * static_cast<double>(c[i]) * static_cast<double>(row[i]);
    for (int64_t j = 0; j < E; ++j) {
      const double sj = static_cast<double>(row[j]), cj = static_cast<double>(c[j]);
      const double ds = K > 1 ? w * cj / (z + kEps) - dot / ((z + kEps) * (z + kEps)) : w * cj;
      dlogits[n * E + j] += static_cast<T>(ds * sj * (1.0 - sj));
    }
  }
}

void check_scores(const Tensor& scores, int64_t top_k, const char* what) {
  NM_CHECK(scores.rank() == 2, "{}: scores must be [B*S, E], got {}", what, scores.shape().str());
  NM_CHECK(top_k >= 1 && top_k <= scores.dim(1), "{}: top_k {} for {} experts", what, top_k, scores.dim(1));
}

}  // namespace

void moe_seq_aux_forward(Context& ctx, int64_t top_k, const Tensor& scores, int64_t sequences, Tensor& counts,
                         Tensor& psum) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  check_scores(scores, top_k, "moe_seq_aux_forward");
  const int64_t N = scores.dim(0), E = scores.dim(1), B = sequences;
  NM_CHECK(B > 0 && N % B == 0, "moe_seq_aux_forward: {} tokens are not {} sequences", N, B);
  expect_shape(counts, {B, E}, "moe seq aux counts");
  expect_shape(psum, {B, E}, "moe seq aux psum");
  expect_dtype(counts, scores.dtype(), "moe seq aux counts");
  expect_dtype(psum, scores.dtype(), "moe seq aux psum");
#if NEMOTRON_CUDA
  if (scores.device().is_cuda()) {
    expect_dtype(scores, DType::f32, "moe seq aux scores on CUDA");
    NM_CHECK(E <= kMoeSeqAuxMaxExperts, "moe_seq_aux_forward on CUDA: at most {} experts, got {}",
             kMoeSeqAuxMaxExperts, E);
    MoeSeqAuxCudaArgs a;
    a.scores = static_cast<const float*>(scores.raw());
    a.counts = static_cast<float*>(counts.raw()), a.psum = static_cast<float*>(psum.raw());
    a.B = B, a.S = N / B, a.E = E, a.K = top_k;
    NM_CUDA_CHECK(moe_seq_aux_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(scores, "moe_seq_aux_forward");
  dispatch_float(scores.dtype(), "moe_seq_aux_forward", [&](auto zero) {
    using T = decltype(zero);
    forward_ref<T>(scores.data<T>(), B, N / B, E, top_k, counts.data<T>(), psum.data<T>());
  });
}

void moe_seq_aux_backward(Context& ctx, int64_t top_k, const Tensor& scores, const Tensor& counts, double weight,
                          Tensor& dlogits) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  check_scores(scores, top_k, "moe_seq_aux_backward");
  const int64_t N = scores.dim(0), E = scores.dim(1);
  NM_CHECK(counts.rank() == 2 && counts.dim(1) == E && counts.dim(0) > 0 && N % counts.dim(0) == 0,
           "moe_seq_aux_backward: counts {} for scores {}", counts.shape().str(), scores.shape().str());
  expect_dtype(counts, scores.dtype(), "moe seq aux counts");
  expect_shape(dlogits, scores.shape(), "moe seq aux dlogits");
  NM_CHECK(stat_dtype(dlogits.dtype()) == scores.dtype(), "moe seq aux dlogits: {} does not go with {} scores",
           dtype_name(dlogits.dtype()), dtype_name(scores.dtype()));
  const int64_t B = counts.dim(0);
#if NEMOTRON_CUDA
  if (scores.device().is_cuda()) {
    NM_CHECK(dlogits.dtype() == DType::f32 || dlogits.dtype() == DType::bf16,
             "moe_seq_aux_backward on CUDA: float32 or bfloat16 dlogits, got {}", dtype_name(dlogits.dtype()));
    MoeSeqAuxCudaArgs a;
    a.scores = static_cast<const float*>(scores.raw());
    a.counts = static_cast<float*>(counts.raw());
    a.dlogits = dlogits.raw(), a.bf16 = dlogits.dtype() == DType::bf16;
    a.B = B, a.S = N / B, a.E = E, a.K = top_k, a.weight = static_cast<float>(weight);
    NM_CUDA_CHECK(moe_seq_aux_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(scores, "moe_seq_aux_backward");
  dispatch_float(scores.dtype(), "moe_seq_aux_backward", [&](auto zero) {
    using T = decltype(zero);
    backward_ref<T>(scores.data<T>(), N, N / B, E, top_k, weight, counts.data<T>(), dlogits.data<T>());
  });
}

}  // namespace nemotron::ops
