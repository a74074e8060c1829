// CPU reference for MoE dispatch/combine: a counting sort builds the handle; the four kernels are
// row copies and K-term weighted sums.
#include <algorithm>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/moe_dispatch.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/moe_dispatch_cuda.h"
#endif

namespace nemotron::ops {

namespace {

void check_rows(const Tensor& t, int64_t rows, int64_t d, const char* what) {
  NM_CHECK(t.rank() == 2 && t.dim(0) == rows && t.dim(1) == d, "{}: expected [{}, {}], got {}", what, rows, d,
           t.shape().str());
}

// Rows of width d per thread, so that tiny shapes stay on one thread.
int64_t rows_per_thread(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d)); }

void set_offsets(MoeDispatch& m) {
  m.expert_offset.assign(static_cast<size_t>(m.num_experts + 1), 0);
  for (int64_t e = 0; e < m.num_experts; ++e) m.expert_offset[e + 1] = m.expert_offset[e] + m.tokens_per_expert[e];
}

#if NEMOTRON_CUDA
// Counts and slots on the device; the counts come back to the host in one copy. An expert index
// out of range is not counted, which the total then reveals.
void make_dispatch_cuda(Context& ctx, const Tensor& topk_idx, MoeDispatch& m, bool counts_to_host) {
  const int64_t S = m.num_slots();
  Tensor counts = Tensor::empty({m.num_experts}, DType::i32, *ctx.backend);
  m.counts = counts;
  MoeMakeDispatchCudaArgs a;
  a.topk_idx = static_cast<const int32_t*>(topk_idx.raw());
  a.counts = static_cast<int32_t*>(counts.raw());
  a.slot_token = static_cast<int32_t*>(m.slot_token.raw());
  a.slot_of = static_cast<int32_t*>(m.slot_of.raw());
  a.N = m.num_tokens, a.K = m.top_k, a.E = m.num_experts;
  cudaStream_t st = cuda::cuda_stream(ctx);
  NM_CUDA_CHECK(moe_count_experts_cuda(a, st));
  NM_CUDA_CHECK(moe_place_slots_cuda(a, st));
  if (!counts_to_host) return;
  Tensor host = counts.to_host(DType::i32);
  const int32_t* c = host.data<int32_t>();
  m.tokens_per_expert.assign(c, c + m.num_experts);
  set_offsets(m);
  NM_CHECK(m.expert_offset.back() == S, "moe_make_dispatch: {} of {} routing entries name an expert in [0, {})",
           m.expert_offset.back(), S, m.num_experts);
}

MoePermuteCudaArgs permute_args(const MoeDispatch& m, const Tensor& rows) {
  NM_CHECK(rows.dtype() == DType::f32 || rows.dtype() == DType::bf16, "moe dispatch on CUDA: float32 or bfloat16, got {}",
           dtype_name(rows.dtype()));
  MoePermuteCudaArgs a;
  a.slot_token = static_cast<const int32_t*>(m.slot_token.raw());
  a.slot_of = static_cast<const int32_t*>(m.slot_of.raw());
  a.N = m.num_tokens, a.K = m.top_k, a.d = rows.dim(-1), a.bf16 = rows.dtype() == DType::bf16;
  return a;
}
#endif

}  // namespace

MoeDispatch moe_make_dispatch(Context& ctx, const Tensor& topk_idx, int64_t num_experts, bool counts_to_host) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  NM_CHECK(topk_idx.rank() == 2, "moe_make_dispatch: topk_idx must be [N, K], got {}", topk_idx.shape().str());
  expect_dtype(topk_idx, DType::i32, "moe_make_dispatch topk_idx");
  MoeDispatch m;
  m.num_tokens = topk_idx.dim(0);
  m.top_k = topk_idx.dim(1);
  m.num_experts = num_experts;
  const int64_t N = m.num_tokens, K = m.top_k, S = N * K;
  NM_CHECK(num_experts > 0, "moe_make_dispatch: {} experts", num_experts);
  // Not from the workspace: the handle is saved for the backward.
  m.slot_token = Tensor::empty({S}, DType::i32, *ctx.backend);
  m.slot_of = Tensor::empty({N, K}, DType::i32, *ctx.backend);
#if NEMOTRON_CUDA
  if (topk_idx.device().is_cuda()) {
    make_dispatch_cuda(ctx, topk_idx, m, counts_to_host);
    return m;
  }
#endif
  require_cpu(topk_idx, "moe_make_dispatch");
  const int32_t* I = topk_idx.data<int32_t>();
  m.tokens_per_expert.assign(static_cast<size_t>(num_experts), 0);
  for (int64_t i = 0; i < S; ++i) {
    NM_CHECK(I[i] >= 0 && I[i] < num_experts, "moe_make_dispatch: expert {} out of range [0, {})", I[i], num_experts);
    ++m.tokens_per_expert[I[i]];
  }
  set_offsets(m);
  m.counts = Tensor::empty({num_experts}, DType::i32, *ctx.backend);
  for (int64_t e = 0; e < num_experts; ++e)
    m.counts.data<int32_t>()[e] = static_cast<int32_t>(m.tokens_per_expert[static_cast<size_t>(e)]);
  int32_t* st = m.slot_token.data<int32_t>();
  int32_t* so = m.slot_of.data<int32_t>();
  std::vector<int64_t> next(m.expert_offset.begin(), m.expert_offset.end() - 1);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < K; ++j) {
      int64_t slot = next[I[n * K + j]]++;
      st[slot] = static_cast<int32_t>(n);
      so[n * K + j] = static_cast<int32_t>(slot);
    }
  return m;
}

MoeDispatch moe_make_dispatch_host(Context& ctx, const std::vector<int32_t>& topk_idx, int64_t num_tokens,
                                   int64_t top_k, int64_t num_experts) {
  NM_CHECK(static_cast<int64_t>(topk_idx.size()) == num_tokens * top_k, "moe_make_dispatch_host: {} entries for [{}, {}]",
           topk_idx.size(), num_tokens, top_k);
  Context host{&host_backend(), nullptr, ctx.compute_dtype};
  MoeDispatch m = moe_make_dispatch(host, Tensor::from_vector<int32_t>({num_tokens, top_k}, topk_idx), num_experts);
  if (ctx.backend->device().is_cpu()) return m;
  m.counts = m.counts.to(*ctx.backend);
  m.slot_token = m.slot_token.to(*ctx.backend);
  m.slot_of = m.slot_of.to(*ctx.backend);
  return m;
}

void moe_dispatch_forward(Context& ctx, const MoeDispatch& m, const Tensor& x, Tensor& xs) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  const int64_t d = x.dim(-1);
  check_rows(x, m.num_tokens, d, "moe_dispatch_forward x");
  check_rows(xs, m.num_slots(), d, "moe_dispatch_forward xs");
  expect_dtype(xs, x.dtype(), "moe_dispatch_forward xs");
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    MoePermuteCudaArgs a = permute_args(m, x);
    a.src = x.raw(), a.dst = xs.raw();
    NM_CUDA_CHECK(moe_dispatch_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(x, "moe_dispatch_forward");
  dispatch_float(x.dtype(), "moe_dispatch_forward", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* pxs = xs.data<T>();
    const int32_t* st = m.slot_token.data<int32_t>();
    cpu::parallel_for(m.num_slots(), [&](int64_t s) {
      const T* src = px + static_cast<int64_t>(st[s]) * d;
      std::copy(src, src + d, pxs + s * d);
    }, rows_per_thread(d));
  });
}

void moe_dispatch_backward(Context& ctx, const MoeDispatch& m, const Tensor& dxs, Tensor& dx) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  const int64_t d = dxs.dim(-1), K = m.top_k;
  check_rows(dxs, m.num_slots(), d, "moe_dispatch_backward dxs");
  check_rows(dx, m.num_tokens, d, "moe_dispatch_backward dx");
  expect_dtype(dx, dxs.dtype(), "moe_dispatch_backward dx");
#if NEMOTRON_CUDA
  if (dxs.device().is_cuda()) {
    MoePermuteCudaArgs a = permute_args(m, dxs);
    a.src = dxs.raw(), a.dst = dx.raw();
    NM_CUDA_CHECK(moe_dispatch_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(dxs, "moe_dispatch_backward");
  dispatch_float(dxs.dtype(), "moe_dispatch_backward", [&](auto zero) {
    using T = decltype(zero);
    const T* g = dxs.data<T>();
    T* out = dx.data<T>();
    const int32_t* so = m.slot_of.data<int32_t>();
    cpu::parallel_for(m.num_tokens, [&](int64_t n) {
      T* row = out + n * d;
      std::fill(row, row + d, T(0));
      for (int64_t j = 0; j < K; ++j) {
        const T* src = g + static_cast<int64_t>(so[n * K + j]) * d;
        for (int64_t c = 0; c < d; ++c) row[c] += src[c];
      }
    }, rows_per_thread(d));
  });
}

void moe_combine_forward(Context& ctx, const MoeDispatch& m, const Tensor& ys, const Tensor& w, Tensor& y) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  const int64_t d = ys.dim(-1), K = m.top_k;
  check_rows(ys, m.num_slots(), d, "moe_combine_forward ys");
  check_rows(w, m.num_tokens, K, "moe_combine_forward w");
  check_rows(y, m.num_tokens, d, "moe_combine_forward y");
  expect_dtype(w, stat_dtype(ys.dtype()), "moe_combine_forward w");
  expect_dtype(y, ys.dtype(), "moe_combine_forward y");
#if NEMOTRON_CUDA
  if (ys.device().is_cuda()) {
    MoePermuteCudaArgs a = permute_args(m, ys);
    a.src = ys.raw(), a.dst = y.raw(), a.w = static_cast<const float*>(w.raw());
    NM_CUDA_CHECK(moe_combine_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(ys, "moe_combine_forward");
  dispatch_float(ys.dtype(), "moe_combine_forward", [&](auto zero) {
    using T = decltype(zero);
    const T *pys = ys.data<T>(), *pw = w.data<T>();
    T* out = y.data<T>();
    const int32_t* so = m.slot_of.data<int32_t>();
    cpu::parallel_for(m.num_tokens, [&](int64_t n) {
      T* row = out + n * d;
      std::fill(row, row + d, T(0));
      for (int64_t j = 0; j < K; ++j) {
        const T* src = pys + static_cast<int64_t>(so[n * K + j]) * d;
        const T wj = pw[n * K + j];
        for (int64_t c = 0; c < d; ++c) row[c] += wj * src[c];
      }
    }, rows_per_thread(d));
  });
}

void moe_combine_backward(Context& ctx, const MoeDispatch& m, const Tensor& ys, const Tensor& w, const Tensor& dy,
                          Tensor& dys, Tensor& dw) {
  OpScope scope(ctx, OpPhase::moe_routing, __func__);
  const int64_t d = ys.dim(-1), K = m.top_k;
  check_rows(ys, m.num_slots(), d, "moe_combine_backward ys");
  check_rows(w, m.num_tokens, K, "moe_combine_backward w");
  check_rows(dy, m.num_tokens, d, "moe_combine_backward dy");
  check_rows(dys, m.num_slots(), d, "moe_combine_backward dys");
  check_rows(dw, m.num_tokens, K, "moe_combine_backward dw");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&dy, &dys})
    expect_dtype(*t, ys.dtype(), "moe_combine_backward dy/dys");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&w, &dw})
    expect_dtype(*t, stat_dtype(ys.dtype()), "moe_combine_backward w/dw");
#if NEMOTRON_CUDA
  if (ys.device().is_cuda()) {
    MoePermuteCudaArgs a = permute_args(m, ys);
    a.src = ys.raw(), a.dst = dys.raw(), a.dy = dy.raw(), a.w = static_cast<const float*>(w.raw());
    a.dw = static_cast<float*>(dw.raw());
    NM_CUDA_CHECK(moe_combine_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(ys, "moe_combine_backward");
  dispatch_float(ys.dtype(), "moe_combine_backward", [&](auto zero) {
    using T = decltype(zero);
    const T *pys = ys.data<T>(), *pw = w.data<T>(), *pdy = dy.data<T>();
    T *pdys = dys.data<T>(), *pdw = dw.data<T>();
    const int32_t* so = m.slot_of.data<int32_t>();
    cpu::parallel_for(m.num_tokens, [&](int64_t n) {
      const T* g = pdy + n * d;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t s = so[n * K + j];
        const T* src = pys + s * d;
        T* dst = pdys + s * d;
        const T wj = pw[n * K + j];
        T dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += g[c] * src[c], dst[c] = wj * g[c];
        pdw[n * K + j] = dot;
      }
    }, rows_per_thread(d));
  });
}

}  // namespace nemotron::ops
