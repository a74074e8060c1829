// CPU reference for rotary embeddings: one cos/sin table per call, then a plain loop per token.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/rope.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/rope_cuda.h"
#endif

namespace nemotron::ops {

namespace {

// sign = +1 rotates by +angle (forward), -1 by -angle (backward). pos: position_ids [B, T] or null
// (position of token t = t); either way position_offset is added. One cos/sin row per distinct
// table index: token t without pos, token (b, t) with it.
template <class T>
void rotate_ref(const T* x, T* y, int64_t B, int64_t T_, int64_t nh, int64_t hd, const RopeFreq& freq, int64_t offset,
                double sign, const int32_t* pos) {
  const int64_t half = hd / 2, rows = pos ? B * T_ : T_;
  std::vector<T> cs(static_cast<size_t>(rows * half)), sn(cs.size());
  std::vector<double> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) f[i] = rope_inv_freq(freq, i, hd);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < half; ++i) {
      double a = static_cast<double>(offset + (pos ? pos[r] : r)) * f[i];
      cs[r * half + i] = static_cast<T>(std::cos(a));
      sn[r * half + i] = static_cast<T>(sign * std::sin(a));
    }
  cpu::parallel_for(B * T_, [&](int64_t bt) {
    const int64_t t = pos ? bt : bt % T_;
    const T* c = cs.data() + t * half;
    const T* s = sn.data() + t * half;
    for (int64_t h = 0; h < nh; ++h) {
      const T* xr = x + (bt * nh + h) * hd;
      T* yr = y + (bt * nh + h) * hd;
      for (int64_t i = 0; i < half; ++i) {
        T a = xr[i], b = xr[i + half];  // read both before writing: y may alias x
        yr[i] = a * c[i] - b * s[i];
        yr[i + half] = b * c[i] + a * s[i];
      }
    }
  }, std::max<int64_t>(1, 16384 / (nh * hd)));  // keep tiny shapes on one thread
}

void rotate(Context& ctx, const Tensor& x, const RopeFreq& freq, Tensor& y, int64_t offset, double sign,
            const Tensor& position_ids, const char* op) {
  NM_CHECK(x.rank() == 4 && x.dim(3) % 2 == 0, "{}: expected [B, T, heads, even head_dim], got {}", op,
           x.shape().str());
  NM_CHECK(freq.theta > 0, "{}: rope_theta must be positive, got {}", op, freq.theta);
  NM_CHECK(!freq.llama3() || (freq.factor >= 1 && freq.high_freq_factor > freq.low_freq_factor &&
                              freq.low_freq_factor > 0 && freq.original_max_position_embeddings > 0),
           "{}: llama3 rope_scaling needs factor >= 1, 0 < low_freq_factor < high_freq_factor and a positive "
           "original_max_position_embeddings", op);
  if (position_ids.defined()) {
    NM_CHECK(position_ids.rank() == 2 && position_ids.dim(0) == x.dim(0) && position_ids.dim(1) == x.dim(1),
             "{}: position_ids must be [B, T] = [{}, {}], got {}", op, x.dim(0), x.dim(1), position_ids.shape().str());
    NM_CHECK(position_ids.dtype() == DType::i32, "{}: position_ids must be int32, got {}", op,
             dtype_name(position_ids.dtype()));
    NM_CHECK(position_ids.device() == x.device(), "{}: position_ids on {}, x on {}", op, position_ids.device().str(),
             x.device().str());
  }
  expect_shape(y, x.shape(), op);
  expect_dtype(y, x.dtype(), op);
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    NM_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", op,
             dtype_name(x.dtype()));
    RopeCudaArgs a;
    a.x = x.raw(), a.y = y.raw(), a.B = x.dim(0), a.T = x.dim(1), a.nh = x.dim(2), a.hd = x.dim(3);
    a.freq = freq, a.position_offset = offset, a.sign = sign, a.bf16 = x.dtype() == DType::bf16;
    a.position_ids = position_ids.defined() ? static_cast<const int32_t*>(position_ids.raw()) : nullptr;
    NM_CUDA_CHECK(rope_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  (void)ctx;
  require_cpu(x, op);
  dispatch_float(x.dtype(), op, [&](auto zero) {
    using T = decltype(zero);
    rotate_ref<T>(x.data<T>(), y.data<T>(), x.dim(0), x.dim(1), x.dim(2), x.dim(3), freq, offset, sign,
                  position_ids.defined() ? position_ids.data<int32_t>() : nullptr);
  });
}

}  // namespace

void rope_forward(Context& ctx, const Tensor& x, const RopeFreq& freq, Tensor& y, int64_t position_offset,
                  const Tensor& position_ids) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  rotate(ctx, x, freq, y, position_offset, 1.0, position_ids, "rope_forward");
}

void rope_backward(Context& ctx, const Tensor& dy, const RopeFreq& freq, Tensor& dx, int64_t position_offset,
                   const Tensor& position_ids) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  rotate(ctx, dy, freq, dx, position_offset, -1.0, position_ids, "rope_backward");
}

}  // namespace nemotron::ops
