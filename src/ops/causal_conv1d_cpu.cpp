#include <cmath>
#include <vector>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/causal_conv1d.h"
#include "ops/dispatch.h"
#include "ops/seq_idx.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/causal_conv1d_cuda.h"
#endif

namespace nemotron::ops {

namespace {

struct ConvDims {
  int64_t B, T, C, K;
};

template <class T>
T sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

// Whether tap source ts may feed token t of row b: same packed sequence (always without seq_idx).
inline bool same_sequence(const int32_t* seq, const ConvDims& d, int64_t b, int64_t ts, int64_t t) {
  return !seq || seq[b * d.T + ts] == seq[b * d.T + t];
}

// pre-activation of one row (b, t) for all channels; bias may be null.
template <class T>
void conv_row(const ConvDims& d, const T* x, const T* w, const T* bias, const int32_t* seq, int64_t b, int64_t t,
              T* pre) {
  for (int64_t c = 0; c < d.C; ++c) pre[c] = bias ? bias[c] : T(0);
  for (int64_t k = 0; k < d.K; ++k) {
    int64_t ts = t - (d.K - 1) + k;
    if (ts < 0 || !same_sequence(seq, d, b, ts, t)) continue;
    const T* xr = x + (b * d.T + ts) * d.C;
    for (int64_t c = 0; c < d.C; ++c) pre[c] += w[c * d.K + k] * xr[c];
  }
}

template <class T>
void forward_ref(const ConvDims& d, const T* x, const T* w, const T* bias, const int32_t* seq, T* y) {
  cpu::parallel_for(d.B * d.T, [&](int64_t row) {
    T* yr = y + row * d.C;
    conv_row(d, x, w, bias, seq, row / d.T, row % d.T, yr);
    for (int64_t c = 0; c < d.C; ++c) yr[c] = yr[c] * sigmoid(yr[c]);
  }, cpu::grain_for(d.C * (d.K + 4)));
}

template <class T>
void backward_ref(const ConvDims& d, const T* x, const T* w, const T* bias, const int32_t* seq, const T* dy, T* dpre,
                  T* dx, T* dw, T* dbias) {
  // dpre = dy * SiLU'(pre), SiLU'(p) = s (1 + p (1 - s)), s = sigmoid(p).
  cpu::parallel_for(d.B * d.T, [&](int64_t row) {
    T* pr = dpre + row * d.C;
    conv_row(d, x, w, bias, seq, row / d.T, row % d.T, pr);
    for (int64_t c = 0; c < d.C; ++c) {
      T p = pr[c], s = sigmoid(p);
      pr[c] = dy[row * d.C + c] * s * (T(1) + p * (T(1) - s));
    }
  }, cpu::grain_for(d.C * (d.K + 6)));
  // dx[t] = sum_k dpre[t + (K-1) - k] w[k]
  cpu::parallel_for(d.B * d.T, [&](int64_t row) {
    int64_t b = row / d.T, t = row % d.T;
    T* dxr = dx + row * d.C;
    for (int64_t c = 0; c < d.C; ++c) dxr[c] = T(0);
    for (int64_t k = 0; k < d.K; ++k) {
      int64_t to = t + (d.K - 1) - k;
      if (to >= d.T || !same_sequence(seq, d, b, t, to)) continue;
      const T* pr = dpre + (b * d.T + to) * d.C;
      for (int64_t c = 0; c < d.C; ++c) dxr[c] += pr[c] * w[c * d.K + k];
    }
  }, cpu::grain_for(d.C * d.K));
  // dw, dbias: a block of channels per task, rows reduced in a fixed order (bitwise reproducible)
  // with the channel loop innermost (contiguous).
  constexpr int64_t kBlock = 64;
  const int64_t blocks = (d.C + kBlock - 1) / kBlock;
  cpu::parallel_for(blocks, [&](int64_t blk) {
    const int64_t c0 = blk * kBlock, nc = std::min(kBlock, d.C - c0);
    std::vector<T> acc(static_cast<size_t>((d.K + 1) * kBlock), T(0));  // [K + 1, block]: dw^T, then dbias
    for (int64_t b = 0; b < d.B; ++b)
      for (int64_t t = 0; t < d.T; ++t) {
        const T* pr = dpre + (b * d.T + t) * d.C + c0;
        for (int64_t k = std::max<int64_t>(0, (d.K - 1) - t); k < d.K; ++k) {
          if (!same_sequence(seq, d, b, t - (d.K - 1) + k, t)) continue;
          const T* xr = x + (b * d.T + t - (d.K - 1) + k) * d.C + c0;
          T* a = acc.data() + k * kBlock;
          for (int64_t c = 0; c < nc; ++c) a[c] += pr[c] * xr[c];
        }
        T* a = acc.data() + d.K * kBlock;
        for (int64_t c = 0; c < nc; ++c) a[c] += pr[c];
      }
    for (int64_t c = 0; c < nc; ++c) {
      for (int64_t k = 0; k < d.K; ++k) dw[(c0 + c) * d.K + k] += acc[k * kBlock + c];
      if (dbias) dbias[c0 + c] += acc[d.K * kBlock + c];
    }
  }, cpu::grain_for(d.B * d.T * (d.K + 1) * kBlock));
}

ConvDims check_args(const Tensor& x, const Tensor& w, const Tensor& bias, const char* op) {
  NM_CHECK(x.rank() == 3, "{}: x must be [B, T, C], got {}", op, x.shape().str());
  ConvDims d{x.dim(0), x.dim(1), x.dim(2), w.dim(-1)};
  bool ok_w = (w.rank() == 2 && w.dim(0) == d.C) || (w.rank() == 3 && w.dim(0) == d.C && w.dim(1) == 1);
  NM_CHECK(ok_w && d.K >= 1, "{}: weight must be [{}, K] or [{}, 1, K], got {}", op, d.C, d.C, w.shape().str());
  expect_dtype(w, x.dtype(), "causal_conv1d weight");
  if (bias.defined()) {
    expect_shape(bias, {d.C}, "causal_conv1d bias");
    expect_dtype(bias, x.dtype(), "causal_conv1d bias");
  }
  return d;
}

#if NEMOTRON_CUDA
static_assert(kCausalConv1dMaxParts == kCausalConv1dCudaMaxParts);

// The launch arguments for parts xs (their channels and x pointers; the caller sets y or dy, dx).
CausalConv1dCudaArgs cuda_args(std::span<const Tensor> xs, int64_t K, const Tensor& w, const Tensor& bias,
                               const Tensor& seq_idx) {
  const DType dt = xs[0].dtype();
  NM_CHECK(dt == DType::f32 || dt == DType::bf16, "causal_conv1d on CUDA: float32 or bfloat16, got {}",
           dtype_name(dt));
  NM_CHECK(K <= kCausalConv1dCudaMaxK, "causal_conv1d on CUDA: kernel width K = {} exceeds {}", K,
           kCausalConv1dCudaMaxK);
  CausalConv1dCudaArgs a;
  a.parts = static_cast<int>(xs.size());
  for (size_t p = 0; p < xs.size(); ++p) a.x[p] = xs[p].raw(), a.C[p] = xs[p].dim(2);
  a.w = w.raw(), a.bias = bias.defined() ? bias.raw() : nullptr;
  a.B = xs[0].dim(0), a.T = xs[0].dim(1), a.K = K, a.bf16 = dt == DType::bf16;
  a.seq_idx = seq_idx.defined() ? static_cast<const int32_t*>(seq_idx.raw()) : nullptr;
  return a;
}
#endif

// Checks parts xs (and their outputs `outs`, named `what`) against each other and w: every part
// [B, T, C_i] of x's dtype, at most kCausalConv1dMaxParts, sum C_i = w's rows. Returns sum C_i.
int64_t check_parts(std::span<const Tensor> xs, std::span<const Tensor> outs, const char* what, const Tensor& w,
                    const char* op) {
  NM_CHECK(!xs.empty() && xs.size() <= static_cast<size_t>(kCausalConv1dMaxParts) && outs.size() == xs.size(),
           "{}: 1 to {} parts with one {} each, got {} parts and {} {}", op, kCausalConv1dMaxParts, what, xs.size(),
           outs.size(), what);
  int64_t C = 0;
  for (size_t p = 0; p < xs.size(); ++p) {
    NM_CHECK(xs[p].rank() == 3 && xs[p].dim(0) == xs[0].dim(0) && xs[p].dim(1) == xs[0].dim(1),
             "{}: part {} must be [{}, {}, C], got {}", op, p, xs[0].dim(0), xs[0].dim(1), xs[p].shape().str());
    expect_dtype(xs[p], xs[0].dtype(), "causal_conv1d part");
    expect_shape(outs[p], xs[p].shape(), what);
    expect_dtype(outs[p], xs[p].dtype(), what);
    C += xs[p].dim(2);
  }
  NM_CHECK(w.rank() >= 2 && w.dim(0) == C, "{}: weight must have {} rows (the parts' channels), got {}", op, C,
           w.shape().str());
  return C;
}

// Part p's rows of a [C_total, ...] parameter (or gradient); undefined stays undefined.
Tensor part_rows(const Tensor& t, int64_t begin, int64_t C) { return t.defined() ? t.slice(begin, begin + C) : Tensor(); }

}  // namespace

void causal_conv1d_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y,
                           const Tensor& seq_idx) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  ConvDims d = check_args(x, w, bias, "causal_conv1d_forward");
  check_seq_idx(seq_idx, d.B, d.T, x, "causal_conv1d_forward");
  expect_shape(y, x.shape(), "causal_conv1d output");
  expect_dtype(y, x.dtype(), "causal_conv1d output");
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    CausalConv1dCudaArgs a = cuda_args({&x, 1}, d.K, w, bias, seq_idx);
    a.y[0] = y.raw();
    NM_CUDA_CHECK(causal_conv1d_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(x, "causal_conv1d_forward");
  dispatch_float(x.dtype(), "causal_conv1d_forward", [&](auto zero) {
    using T = decltype(zero);
    forward_ref<T>(d, x.data<T>(), w.data<T>(), bias.defined() ? bias.data<T>() : nullptr, seq_idx_ptr(seq_idx),
                   y.data<T>());
  });
}

void causal_conv1d_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& dy,
                            Tensor& dx, Tensor& dw, Tensor& dbias, const Tensor& seq_idx) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  ConvDims d = check_args(x, w, bias, "causal_conv1d_backward");
  check_seq_idx(seq_idx, d.B, d.T, x, "causal_conv1d_backward");
  expect_shape(dy, x.shape(), "causal_conv1d dy");
  expect_shape(dx, x.shape(), "causal_conv1d dx");
  expect_shape(dw, w.shape(), "causal_conv1d dw");
  NM_CHECK(bias.defined() == dbias.defined(), "causal_conv1d_backward: dbias must be given exactly when bias is");
  expect_dtype(dy, x.dtype(), "causal_conv1d dy");
  expect_dtype(dx, x.dtype(), "causal_conv1d dx");
  expect_dtype(dw, grad_dtype(x.dtype()), "causal_conv1d dw");
  if (dbias.defined()) {
    expect_shape(dbias, {d.C}, "causal_conv1d dbias");
    expect_dtype(dbias, grad_dtype(x.dtype()), "causal_conv1d dbias");
  }
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    CausalConv1dCudaArgs a = cuda_args({&x, 1}, d.K, w, bias, seq_idx);
    a.dy[0] = dy.raw(), a.dx[0] = dx.raw(), a.dw = static_cast<float*>(dw.raw());
    a.dbias = dbias.defined() ? static_cast<float*>(dbias.raw()) : nullptr;
    NM_CUDA_CHECK(causal_conv1d_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(x, "causal_conv1d_backward");
  Tensor dpre = ctx.empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), "causal_conv1d_backward", [&](auto zero) {
    using T = decltype(zero);
    backward_ref<T>(d, x.data<T>(), w.data<T>(), bias.defined() ? bias.data<T>() : nullptr, seq_idx_ptr(seq_idx),
                    dy.data<T>(),
                    dpre.data<T>(), dx.data<T>(), dw.data<T>(), dbias.defined() ? dbias.data<T>() : nullptr);
  });
}

void causal_conv1d_forward_parts(Context& ctx, std::span<const Tensor> xs, const Tensor& w, const Tensor& bias,
                                 std::span<Tensor> ys, const Tensor& seq_idx) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const int64_t C = check_parts(xs, {ys.data(), ys.size()}, "causal_conv1d output", w, "causal_conv1d_forward_parts");
  check_args(xs[0], part_rows(w, 0, xs[0].dim(2)), part_rows(bias, 0, xs[0].dim(2)), "causal_conv1d_forward_parts");
  if (bias.defined()) expect_shape(bias, {C}, "causal_conv1d bias");
  check_seq_idx(seq_idx, xs[0].dim(0), xs[0].dim(1), xs[0], "causal_conv1d_forward_parts");
#if NEMOTRON_CUDA
  if (xs[0].device().is_cuda()) {
    CausalConv1dCudaArgs a = cuda_args(xs, w.dim(-1), w, bias, seq_idx);
    for (size_t p = 0; p < ys.size(); ++p) a.y[p] = ys[p].raw();
    NM_CUDA_CHECK(causal_conv1d_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  int64_t begin = 0;
  for (size_t p = 0; p < xs.size(); ++p) {
    const int64_t Cp = xs[p].dim(2);
    causal_conv1d_forward(ctx, xs[p], part_rows(w, begin, Cp), part_rows(bias, begin, Cp), ys[p], seq_idx);
    begin += Cp;
  }
}

void causal_conv1d_backward_parts(Context& ctx, std::span<const Tensor> xs, const Tensor& w, const Tensor& bias,
                                  std::span<const Tensor> dys, std::span<Tensor> dxs, Tensor& dw, Tensor& dbias,
                                  const Tensor& seq_idx) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const int64_t C = check_parts(xs, dys, "causal_conv1d dy", w, "causal_conv1d_backward_parts");
  check_parts(xs, {dxs.data(), dxs.size()}, "causal_conv1d dx", w, "causal_conv1d_backward_parts");
  check_args(xs[0], part_rows(w, 0, xs[0].dim(2)), part_rows(bias, 0, xs[0].dim(2)), "causal_conv1d_backward_parts");
  check_seq_idx(seq_idx, xs[0].dim(0), xs[0].dim(1), xs[0], "causal_conv1d_backward_parts");
  expect_shape(dw, w.shape(), "causal_conv1d dw");
  expect_dtype(dw, grad_dtype(xs[0].dtype()), "causal_conv1d dw");
  NM_CHECK(bias.defined() == dbias.defined(), "causal_conv1d_backward_parts: dbias must be given exactly when bias is");
  if (bias.defined()) {
    expect_shape(bias, {C}, "causal_conv1d bias");
    expect_shape(dbias, {C}, "causal_conv1d dbias");
    expect_dtype(dbias, grad_dtype(xs[0].dtype()), "causal_conv1d dbias");
  }
#if NEMOTRON_CUDA
  if (xs[0].device().is_cuda()) {
    CausalConv1dCudaArgs a = cuda_args(xs, w.dim(-1), w, bias, seq_idx);
    for (size_t p = 0; p < xs.size(); ++p) a.dy[p] = dys[p].raw(), a.dx[p] = dxs[p].raw();
    a.dw = static_cast<float*>(dw.raw());
    a.dbias = dbias.defined() ? static_cast<float*>(dbias.raw()) : nullptr;
    NM_CUDA_CHECK(causal_conv1d_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  int64_t begin = 0;
  for (size_t p = 0; p < xs.size(); ++p) {
    const int64_t Cp = xs[p].dim(2);
    Tensor dwp = part_rows(dw, begin, Cp), dbp = part_rows(dbias, begin, Cp);
    causal_conv1d_backward(ctx, xs[p], part_rows(w, begin, Cp), part_rows(bias, begin, Cp), dys[p], dxs[p], dwp, dbp,
                           seq_idx);
    begin += Cp;
  }
}

}  // namespace nemotron::ops
