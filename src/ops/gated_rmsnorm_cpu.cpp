#include <cmath>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/gated_rmsnorm.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/gated_rmsnorm_cuda.h"
#endif

namespace nemotron::ops {

namespace {

struct NormDims {
  int64_t rows, d, G, gs;  // gs = d / G channels per group
};

template <class T>
T sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

template <class T>
void forward_ref(const NormDims& n, const T* y, const T* z, const T* w, T eps, T* out, T* rstd) {
  cpu::parallel_for(n.rows, [&](int64_t r) {
    for (int64_t g = 0; g < n.G; ++g) {
      int64_t o = r * n.d + g * n.gs;
      T ss = 0;
      for (int64_t i = 0; i < n.gs; ++i) {
        T v = y[o + i] * z[o + i] * sigmoid(z[o + i]);
        out[o + i] = v;
        ss += v * v;
      }
      T s = T(1) / std::sqrt(ss / T(n.gs) + eps);
      rstd[r * n.G + g] = s;
      for (int64_t i = 0; i < n.gs; ++i) out[o + i] *= s * w[g * n.gs + i];
    }
  }, cpu::grain_for(8 * n.d));
}

template <class T>
void backward_ref(const NormDims& n, const T* y, const T* z, const T* w, const T* rstd, const T* dout, T* dy, T* dz,
                  T* dw, T* out) {
  cpu::parallel_for(n.rows, [&](int64_t r) {
    for (int64_t g = 0; g < n.G; ++g) {
      int64_t o = r * n.d + g * n.gs;
      T s = rstd[r * n.G + g], dot = 0;
      for (int64_t i = 0; i < n.gs; ++i) {
        T v = y[o + i] * z[o + i] * sigmoid(z[o + i]);
        dot += w[g * n.gs + i] * dout[o + i] * v * s;
      }
      dot /= T(n.gs);
      for (int64_t i = 0; i < n.gs; ++i) {
        T sz = sigmoid(z[o + i]), silu = z[o + i] * sz;
        T v = y[o + i] * silu;
        T dv = s * (w[g * n.gs + i] * dout[o + i] - v * s * dot);
        dy[o + i] = dv * silu;
        dz[o + i] = dv * y[o + i] * sz * (T(1) + z[o + i] * (T(1) - sz));
        if (out) out[o + i] = y[o + i] * z[o + i] * sz * (s * w[g * n.gs + i]);  // forward_ref's order
      }
    }
  }, cpu::grain_for(16 * n.d));
  // dw reduces over rows in a fixed order (bitwise reproducible).
  for (int64_t r = 0; r < n.rows; ++r)
    for (int64_t c = 0; c < n.d; ++c) {
      int64_t o = r * n.d + c;
      dw[c] += dout[o] * y[o] * z[o] * sigmoid(z[o]) * rstd[r * n.G + c / n.gs];
    }
}

NormDims check_args(const Tensor& y, const Tensor& z, const Tensor& w, int64_t n_groups, const char* op) {
  NM_CHECK(y.rank() >= 1, "{}: y must be [..., d]", op);
  int64_t d = y.dim(-1);
  NM_CHECK(n_groups >= 1 && d % n_groups == 0, "{}: d = {} is not a multiple of n_groups = {}", op, d, n_groups);
  expect_shape(z, y.shape(), "gated_rmsnorm z");
  expect_shape(w, {d}, "gated_rmsnorm weight");
  expect_dtype(z, y.dtype(), "gated_rmsnorm z");
  expect_dtype(w, y.dtype(), "gated_rmsnorm weight");
  int64_t rows = d == 0 ? 0 : y.numel() / d;
  return {rows, d, n_groups, d / n_groups};
}

#if NEMOTRON_CUDA
GatedRmsNormCudaArgs cuda_args(const NormDims& n, const Tensor& y, const Tensor& z, const Tensor& w,
                               const Tensor& rstd) {
  NM_CHECK(y.dtype() == DType::f32 || y.dtype() == DType::bf16, "gated_rmsnorm on CUDA: float32 or bfloat16, got {}",
           dtype_name(y.dtype()));
  GatedRmsNormCudaArgs a;
  a.y = y.raw(), a.z = z.raw(), a.w = w.raw(), a.rstd = static_cast<float*>(rstd.raw());
  a.rows = n.rows, a.d = n.d, a.G = n.G, a.bf16 = y.dtype() == DType::bf16;
  return a;
}
#endif

}  // namespace

void gated_rmsnorm_forward(Context& ctx, const Tensor& y, const Tensor& z, const Tensor& w, int64_t n_groups,
                           double eps, Tensor& out, Tensor& rstd) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NormDims n = check_args(y, z, w, n_groups, "gated_rmsnorm_forward");
  expect_shape(out, y.shape(), "gated_rmsnorm output");
  expect_dtype(out, y.dtype(), "gated_rmsnorm output");
  expect_shape(rstd, {n.rows, n.G}, "gated_rmsnorm rstd");
  expect_dtype(rstd, stat_dtype(y.dtype()), "gated_rmsnorm rstd");
#if NEMOTRON_CUDA
  if (y.device().is_cuda()) {
    GatedRmsNormCudaArgs a = cuda_args(n, y, z, w, rstd);
    a.out = out.raw(), a.eps = static_cast<float>(eps);
    NM_CUDA_CHECK(gated_rmsnorm_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(y, "gated_rmsnorm_forward");
  dispatch_float(y.dtype(), "gated_rmsnorm_forward", [&](auto zero) {
    using T = decltype(zero);
    forward_ref<T>(n, y.data<T>(), z.data<T>(), w.data<T>(), static_cast<T>(eps), out.data<T>(), rstd.data<T>());
  });
}

void gated_rmsnorm_backward(Context& ctx, const Tensor& y, const Tensor& z, const Tensor& w, const Tensor& rstd,
                            int64_t n_groups, const Tensor& dout, Tensor& dy, Tensor& dz, Tensor& dw, Tensor* out) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NormDims n = check_args(y, z, w, n_groups, "gated_rmsnorm_backward");
  expect_shape(rstd, {n.rows, n.G}, "gated_rmsnorm rstd");
  expect_shape(dout, y.shape(), "gated_rmsnorm dout");
  expect_shape(dy, y.shape(), "gated_rmsnorm dy");
  expect_shape(dz, y.shape(), "gated_rmsnorm dz");
  expect_shape(dw, {n.d}, "gated_rmsnorm dw");
  expect_dtype(rstd, stat_dtype(y.dtype()), "gated_rmsnorm rstd");
  expect_dtype(dout, y.dtype(), "gated_rmsnorm dout");
  expect_dtype(dy, y.dtype(), "gated_rmsnorm dy");
  expect_dtype(dz, y.dtype(), "gated_rmsnorm dz");
  expect_dtype(dw, grad_dtype(y.dtype()), "gated_rmsnorm dw");
  if (out) {
    expect_shape(*out, y.shape(), "gated_rmsnorm output");
    expect_dtype(*out, y.dtype(), "gated_rmsnorm output");
  }
#if NEMOTRON_CUDA
  if (y.device().is_cuda()) {
    NM_CHECK(n.gs <= kGatedRmsNormCudaMaxGroup, "gated_rmsnorm on CUDA: groups of {} channels exceed {}", n.gs,
             kGatedRmsNormCudaMaxGroup);
    GatedRmsNormCudaArgs a = cuda_args(n, y, z, w, rstd);
    a.dout = dout.raw(), a.dy = dy.raw(), a.dz = dz.raw(), a.dw = static_cast<float*>(dw.raw());
    a.out = out ? out->raw() : nullptr;
    NM_CUDA_CHECK(gated_rmsnorm_backward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(y, "gated_rmsnorm_backward");
  dispatch_float(y.dtype(), "gated_rmsnorm_backward", [&](auto zero) {
    using T = decltype(zero);
    backward_ref<T>(n, y.data<T>(), z.data<T>(), w.data<T>(), rstd.data<T>(), dout.data<T>(), dy.data<T>(),
                    dz.data<T>(), dw.data<T>(), out ? out->data<T>() : nullptr);
  });
}

}  // namespace nemotron::ops
