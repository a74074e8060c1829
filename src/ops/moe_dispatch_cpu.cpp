// CPU reference for MoE dispatch/combine: a counting sort builds the handle; the four kernels are
// row copies and K-term weighted sums.
#include <algorithm>

#include "backend/cpu/parallel.h"
#include "ops/dispatch.h"
#include "ops/moe_dispatch.h"

namespace nemotron::ops {

namespace {

void check_rows(const Tensor& t, int64_t rows, int64_t d, const char* what) {
  NM_CHECK(t.rank() == 2 && t.dim(0) == rows && t.dim(1) == d, "{}: expected [{}, {}], got {}", what, rows, d,
           t.shape().str());
}

// Rows of width d per thread, so that tiny shapes stay on one thread.
int64_t rows_per_thread(int64_t d) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, d)); }

}  // namespace

MoeDispatch moe_make_dispatch(Context& ctx, const Tensor& topk_idx, int64_t num_experts) {
  require_cpu(topk_idx, "moe_make_dispatch");
  NM_CHECK(topk_idx.rank() == 2, "moe_make_dispatch: topk_idx must be [N, K], got {}", topk_idx.shape().str());
  expect_dtype(topk_idx, DType::i32, "moe_make_dispatch topk_idx");
  MoeDispatch m;
  m.num_tokens = topk_idx.dim(0);
  m.top_k = topk_idx.dim(1);
  m.num_experts = num_experts;
  const int64_t N = m.num_tokens, K = m.top_k, S = N * K;
  const int32_t* I = topk_idx.data<int32_t>();
  m.tokens_per_expert.assign(static_cast<size_t>(num_experts), 0);
  for (int64_t i = 0; i < S; ++i) {
    NM_CHECK(I[i] >= 0 && I[i] < num_experts, "moe_make_dispatch: expert {} out of range [0, {})", I[i], num_experts);
    ++m.tokens_per_expert[I[i]];
  }
  m.expert_offset.assign(static_cast<size_t>(num_experts + 1), 0);
  for (int64_t e = 0; e < num_experts; ++e) m.expert_offset[e + 1] = m.expert_offset[e] + m.tokens_per_expert[e];
  m.slot_token = Tensor::empty({S}, DType::i32, *ctx.backend);
  m.slot_of = Tensor::empty({N, K}, DType::i32, *ctx.backend);
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

void moe_dispatch_forward(Context&, const MoeDispatch& m, const Tensor& x, Tensor& xs) {
  require_cpu(x, "moe_dispatch_forward");
  const int64_t d = x.dim(-1);
  check_rows(x, m.num_tokens, d, "moe_dispatch_forward x");
  check_rows(xs, m.num_slots(), d, "moe_dispatch_forward xs");
  expect_dtype(xs, x.dtype(), "moe_dispatch_forward xs");
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

void moe_dispatch_backward(Context&, const MoeDispatch& m, const Tensor& dxs, Tensor& dx) {
  require_cpu(dxs, "moe_dispatch_backward");
  const int64_t d = dxs.dim(-1), K = m.top_k;
  check_rows(dxs, m.num_slots(), d, "moe_dispatch_backward dxs");
  check_rows(dx, m.num_tokens, d, "moe_dispatch_backward dx");
  expect_dtype(dx, dxs.dtype(), "moe_dispatch_backward dx");
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

void moe_combine_forward(Context&, const MoeDispatch& m, const Tensor& ys, const Tensor& w, Tensor& y) {
  require_cpu(ys, "moe_combine_forward");
  const int64_t d = ys.dim(-1), K = m.top_k;
  check_rows(ys, m.num_slots(), d, "moe_combine_forward ys");
  check_rows(w, m.num_tokens, K, "moe_combine_forward w");
  check_rows(y, m.num_tokens, d, "moe_combine_forward y");
  expect_dtype(w, ys.dtype(), "moe_combine_forward w");
  expect_dtype(y, ys.dtype(), "moe_combine_forward y");
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

void moe_combine_backward(Context&, const MoeDispatch& m, const Tensor& ys, const Tensor& w, const Tensor& dy,
                          Tensor& dys, Tensor& dw) {
  require_cpu(ys, "moe_combine_backward");
  const int64_t d = ys.dim(-1), K = m.top_k;
  check_rows(ys, m.num_slots(), d, "moe_combine_backward ys");
  check_rows(w, m.num_tokens, K, "moe_combine_backward w");
  check_rows(dy, m.num_tokens, d, "moe_combine_backward dy");
  check_rows(dys, m.num_slots(), d, "moe_combine_backward dys");
  check_rows(dw, m.num_tokens, K, "moe_combine_backward dw");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&w, &dy, &dys, &dw})
    expect_dtype(*t, ys.dtype(), "moe_combine_backward tensor");
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
