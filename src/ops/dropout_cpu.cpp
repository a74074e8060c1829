#include <cmath>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "core/rng.h"
#include "ops/dispatch.h"
#include "ops/dropout.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/dropout_cuda.h"
#endif

namespace nemotron::ops {

uint64_t DropoutMask::threshold() const {
  NM_CHECK(p >= 0 && p < 1, "dropout: p {} outside [0, 1)", p);
  return static_cast<uint64_t>(std::llround(p * 4294967296.0));
}

void dropout_apply(Context& ctx, const Tensor& x, const DropoutMask& mask, Tensor& y, bool accumulate) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  expect_shape(y, x.shape(), "dropout output");
  expect_dtype(y, x.dtype(), "dropout output");
  expect_same_device(y, x, "dropout output");
  const uint64_t threshold = mask.threshold();
  const double scale = 1.0 / (1.0 - mask.p);
#if NEMOTRON_CUDA
  if (x.device().is_cuda()) {
    NM_CHECK(x.dtype() == DType::f32 || x.dtype() == DType::bf16, "dropout on CUDA: float32 or bfloat16, got {}",
             dtype_name(x.dtype()));
    DropoutCudaArgs a;
    a.x = x.raw(), a.y = y.raw(), a.n = x.numel();
    a.seed = mask.seed, a.stream = mask.stream, a.threshold = threshold;
    a.scale = static_cast<float>(scale), a.accumulate = accumulate, a.bf16 = x.dtype() == DType::bf16;
    NM_CUDA_CHECK(dropout_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(x, "dropout");
  const Philox rng(mask.seed, mask.stream);
  dispatch_float(x.dtype(), "dropout", [&](auto zero) {
    using T = decltype(zero);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    const T s = static_cast<T>(scale);
    // Four words per Philox block: one block per chunk of 4 elements.
    cpu::parallel_for((x.numel() + 3) / 4, [&](int64_t b) {
      const int64_t end = std::min<int64_t>(x.numel(), 4 * b + 4);
      for (int64_t i = 4 * b; i < end; ++i) {
        const T v = rng.bits(static_cast<uint64_t>(i)) >= threshold ? px[i] * s : T(0);
        py[i] = accumulate ? py[i] + v : v;
      }
    }, 1024);
  });
}

}  // namespace nemotron::ops
