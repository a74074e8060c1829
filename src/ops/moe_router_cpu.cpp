// CPU reference for MoE routing: one token per loop iteration; the top-k is a repeated strict
// argmax, which is what makes the lowest index win every tie.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/moe_router.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/moe_router_cuda.h"
#endif

namespace nemotron::ops {

namespace {

constexpr double kNormEps = 1e-20;  // Megatron / HF: w / (sum w + 1e-20)

template <class T>
void select_ref(const MoeRouterParams& p, const T* scores, const T* bias, int32_t* idx, int64_t N) {
  const int64_t E = p.num_experts, K = p.top_k, G = p.n_group, gs = E / G;
  cpu::parallel_for(N, [&](int64_t n) {
    const T* s = scores + n * E;
    std::vector<T> q(static_cast<size_t>(E));
    std::vector<char> eligible(static_cast<size_t>(E), 1);
    for (int64_t e = 0; e < E; ++e) q[e] = s[e] + bias[e];
    if (G > 1) {
      std::vector<T> group_score(static_cast<size_t>(G));
      for (int64_t g = 0; g < G; ++g) {
        T best = -std::numeric_limits<T>::infinity(), second = best;
        for (int64_t e = g * gs; e < (g + 1) * gs; ++e) {
          if (q[e] > best) second = best, best = q[e];
          else if (q[e] > second) second = q[e];
        }
        group_score[g] = best + second;
      }
      std::vector<char> kept(static_cast<size_t>(G), 0);
      for (int64_t r = 0; r < p.topk_group; ++r) {
        int64_t arg = -1;
        for (int64_t g = 0; g < G; ++g)
          if (!kept[g] && (arg < 0 || group_score[g] > group_score[arg])) arg = g;
        kept[arg] = 1;
      }
      for (int64_t e = 0; e < E; ++e) eligible[e] = kept[e / gs];
    }
    for (int64_t j = 0; j < K; ++j) {
      int64_t arg = -1;
      for (int64_t e = 0; e < E; ++e)
        if (eligible[e] && (arg < 0 || q[e] > q[arg])) arg = e;
      eligible[arg] = 0;
      idx[n * K + j] = static_cast<int32_t>(arg);
    }
  }, 64);
}

template <class T>
void weights_ref(const MoeRouterParams& p, const T* scores, const int32_t* idx, T* w, int64_t N) {
  const int64_t E = p.num_experts, K = p.top_k;
  cpu::parallel_for(N, [&](int64_t n) {
    T sum = 0;
    for (int64_t j = 0; j < K; ++j) sum += (w[n * K + j] = scores[n * E + idx[n * K + j]]);
    T f = static_cast<T>(p.routed_scaling_factor);
    if (p.norm_topk_prob) f /= sum + static_cast<T>(kNormEps);
    for (int64_t j = 0; j < K; ++j) w[n * K + j] *= f;
  }, 256);
}

// With a_j = s[I_j], S = sum a + eps, c = routed_scaling_factor:
//   norm: w_j = c a_j / S  =>  dL/da_k = (c / S) (g_k - sum_j g_j a_j / S);   else dL/da_k = c g_k;
//   dL/dlogit_{I_k} = dL/da_k * a_k (1 - a_k).
template <class T>
void backward_ref(const MoeRouterParams& p, const T* scores, const int32_t* idx, const T* dw, T* dlogits, int64_t N) {
  const int64_t E = p.num_experts, K = p.top_k;
  const T c = static_cast<T>(p.routed_scaling_factor);
  cpu::parallel_for(N, [&](int64_t n) {
    const T* s = scores + n * E;
    const int32_t* I = idx + n * K;
    const T* g = dw + n * K;
    T* dl = dlogits + n * E;
    for (int64_t e = 0; e < E; ++e) dl[e] = 0;
    T S = 0, dot = 0;
    for (int64_t j = 0; j < K; ++j) S += s[I[j]], dot += g[j] * s[I[j]];
    S += static_cast<T>(kNormEps);
    for (int64_t j = 0; j < K; ++j) {
      T a = s[I[j]];
      T da = p.norm_topk_prob ? c / S * (g[j] - dot / S) : c * g[j];
      dl[I[j]] = da * a * (T(1) - a);
    }
  }, 256);
}

// Range and distinctness are checked on the host only: on CUDA that would cost a copy and a sync.
void check_idx(const MoeRouterParams& p, const Tensor& topk_idx, int64_t N) {
  expect_shape(topk_idx, {N, p.top_k}, "moe topk_idx");
  expect_dtype(topk_idx, DType::i32, "moe topk_idx");
  if (!topk_idx.device().is_cpu()) return;
  const int32_t* I = topk_idx.data<int32_t>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < p.top_k; ++j) {
      int32_t e = I[n * p.top_k + j];
      NM_CHECK(e >= 0 && e < p.num_experts, "moe topk_idx[{}, {}] = {} is not an expert of {}", n, j, e,
               p.num_experts);
      for (int64_t j2 = 0; j2 < j; ++j2)
        NM_CHECK(I[n * p.top_k + j2] != e, "moe topk_idx row {} names expert {} twice", n, e);
    }
}

int64_t rows_of(const MoeRouterParams& p, const Tensor& scores, const char* what) {
  NM_CHECK(scores.rank() == 2 && scores.dim(1) == p.num_experts, "{}: expected [N, {}], got {}", what,
           p.num_experts, scores.shape().str());
  return scores.dim(0);
}

#if NEMOTRON_CUDA
MoeRouterCudaArgs cuda_args(const MoeRouterParams& p, const Tensor& scores) {
  expect_dtype(scores, DType::f32, "moe router scores on CUDA (float32 statistics)");
  MoeRouterCudaArgs a;
  a.scores = static_cast<float*>(scores.raw());
  a.N = scores.dim(0), a.E = p.num_experts, a.K = p.top_k, a.n_group = p.n_group, a.topk_group = p.topk_group;
  a.norm_topk_prob = p.norm_topk_prob, a.scale = static_cast<float>(p.routed_scaling_factor);
  return a;
}

void check_compute_dtype(const Tensor& t, const char* what) {
  NM_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", what,
           dtype_name(t.dtype()));
}
#endif

}  // namespace

void MoeRouterParams::validate() const {
  auto fail = [](const std::string& m) { throw InputError("moe router: " + m); };
  if (num_experts <= 0) fail(fmt::format("n_routed_experts: expected a positive count, got {}", num_experts));
  if (top_k <= 0 || top_k > num_experts)
    fail(fmt::format("num_experts_per_tok: expected 1..{} (n_routed_experts), got {}", num_experts, top_k));
  if (n_group <= 0 || num_experts % n_group != 0)
    fail(fmt::format("n_group: {} does not divide n_routed_experts = {}", n_group, num_experts));
  if (n_group > 1 && num_experts / n_group < 2)
    fail(fmt::format("n_group: {} groups of n_routed_experts = {} leave fewer than 2 experts per group (the group "
                     "score sums the top 2)", n_group, num_experts));
  if (topk_group <= 0 || topk_group > n_group)
    fail(fmt::format("topk_group: expected 1..{} (n_group), got {}", n_group, topk_group));
  if (top_k > topk_group * (num_experts / n_group))
    fail(fmt::format("num_experts_per_tok: {} exceeds the {} experts of topk_group = {} groups", top_k,
                     topk_group * (num_experts / n_group), topk_group));
}

void moe_router_scores(Context& ctx, const Tensor& logits, Tensor& scores) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  expect_shape(scores, logits.shape(), "moe scores");
  expect_dtype(scores, stat_dtype(logits.dtype()), "moe scores");
#if NEMOTRON_CUDA
  if (logits.device().is_cuda()) {
    check_compute_dtype(logits, "moe_router_scores logits");
    NM_CHECK(logits.rank() == 2, "moe_router_scores: logits must be [N, E], got {}", logits.shape().str());
    MoeRouterCudaArgs a;
    a.logits = logits.raw(), a.scores = static_cast<float*>(scores.raw());
    a.N = logits.dim(0), a.E = logits.dim(1), a.bf16 = logits.dtype() == DType::bf16;
    NM_CUDA_CHECK(moe_router_scores_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(logits, "moe_router_scores");
  dispatch_float(logits.dtype(), "moe_router_scores", [&](auto zero) {
    using T = decltype(zero);
    const T* l = logits.data<T>();
    T* s = scores.data<T>();
    cpu::parallel_for(logits.numel(), [&](int64_t i) { s[i] = T(1) / (T(1) + std::exp(-l[i])); }, 4096);
  });
}

void moe_select_experts(Context& ctx, const MoeRouterParams& p, const Tensor& scores, const Tensor& bias,
                        Tensor& topk_idx) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  p.validate();
  int64_t N = rows_of(p, scores, "moe_select_experts scores");
  expect_shape(bias, {p.num_experts}, "moe e_score_correction_bias");
  expect_dtype(bias, scores.dtype(), "moe e_score_correction_bias");
  expect_shape(topk_idx, {N, p.top_k}, "moe topk_idx");
  expect_dtype(topk_idx, DType::i32, "moe topk_idx");
#if NEMOTRON_CUDA
  if (scores.device().is_cuda()) {
    NM_CHECK(p.num_experts <= kMoeRouterMaxExperts, "moe_select_experts on CUDA: at most {} experts, got {}",
             kMoeRouterMaxExperts, p.num_experts);
    MoeRouterCudaArgs a = cuda_args(p, scores);
    a.bias = static_cast<const float*>(bias.raw()), a.topk_idx = static_cast<int32_t*>(topk_idx.raw());
    NM_CUDA_CHECK(moe_select_experts_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(scores, "moe_select_experts");
  dispatch_float(scores.dtype(), "moe_select_experts", [&](auto zero) {
    using T = decltype(zero);
    select_ref<T>(p, scores.data<T>(), bias.data<T>(), topk_idx.data<int32_t>(), N);
  });
}

void moe_topk_weights(Context& ctx, const MoeRouterParams& p, const Tensor& scores, const Tensor& topk_idx,
                      Tensor& topk_w) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  p.validate();
  int64_t N = rows_of(p, scores, "moe_topk_weights scores");
  check_idx(p, topk_idx, N);
  expect_shape(topk_w, {N, p.top_k}, "moe topk_w");
  expect_dtype(topk_w, scores.dtype(), "moe topk_w");
#if NEMOTRON_CUDA
  if (scores.device().is_cuda()) {
    MoeRouterCudaArgs a = cuda_args(p, scores);
    a.topk_idx = static_cast<int32_t*>(topk_idx.raw()), a.topk_w = static_cast<float*>(topk_w.raw());
    NM_CUDA_CHECK(moe_topk_weights_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(scores, "moe_topk_weights");
  dispatch_float(scores.dtype(), "moe_topk_weights", [&](auto zero) {
    using T = decltype(zero);
    weights_ref<T>(p, scores.data<T>(), topk_idx.data<int32_t>(), topk_w.data<T>(), N);
  });
}

void moe_router_forward(Context& ctx, const MoeRouterParams& p, const Tensor& logits, const Tensor& bias,
                        Tensor& scores, Tensor& topk_idx, Tensor& topk_w) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  moe_router_scores(ctx, logits, scores);
  moe_select_experts(ctx, p, scores, bias, topk_idx);
  moe_topk_weights(ctx, p, scores, topk_idx, topk_w);
}

void moe_router_backward(Context& ctx, const MoeRouterParams& p, const Tensor& scores, const Tensor& topk_idx,
                         const Tensor& dtopk_w, Tensor& dlogits) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  p.validate();
  int64_t N = rows_of(p, scores, "moe_router_backward scores");
  check_idx(p, topk_idx, N);
  expect_shape(dtopk_w, {N, p.top_k}, "moe dtopk_w");
  expect_shape(dlogits, scores.shape(), "moe dlogits");
  expect_dtype(dtopk_w, scores.dtype(), "moe dtopk_w");
  NM_CHECK(stat_dtype(dlogits.dtype()) == scores.dtype(), "moe dlogits: {} does not go with {} scores",
           dtype_name(dlogits.dtype()), dtype_name(scores.dtype()));
#if NEMOTRON_CUDA
  if (scores.device().is_cuda()) {
    check_compute_dtype(dlogits, "moe_router_backward dlogits");
    MoeRouterCudaArgs a = cuda_args(p, scores);
    a.topk_idx = static_cast<int32_t*>(topk_idx.raw()), a.dtopk_w = static_cast<const float*>(dtopk_w.raw());
    a.dlogits = dlogits.raw(), a.bf16 = dlogits.dtype() == DType::bf16;
    NM_CUDA_CHECK(moe_router_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(scores, "moe_router_backward");
  dispatch_float(scores.dtype(), "moe_router_backward", [&](auto zero) {
    using T = decltype(zero);
    backward_ref<T>(p, scores.data<T>(), topk_idx.data<int32_t>(), dtopk_w.data<T>(), dlogits.data<T>(), N);
  });
}

}  // namespace nemotron::ops
