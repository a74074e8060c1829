#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/cast.h"
#include "ops/dispatch.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/elementwise_cuda.h"
#endif

namespace nemotron::ops {

namespace {

double get(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::f32: return static_cast<const float*>(p)[i];
    default: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
}

void put(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    default: static_cast<uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v)); break;
  }
}

}  // namespace

void cast(Context& ctx, const Tensor& src, Tensor& dst) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NM_CHECK(is_float(src.dtype()) && is_float(dst.dtype()), "cast: float dtypes only, {} -> {}", src.describe(),
           dst.describe());
  NM_CHECK(src.numel() == dst.numel(), "cast: {} -> {}: element counts differ", src.describe(), dst.describe());
  expect_same_device(dst, src, "cast");
  if (src.dtype() == dst.dtype()) {  // a plain copy on either device
    if (src.raw() != dst.raw()) dst.view(src.shape()).copy_from(src);
    return;
  }
#if NEMOTRON_CUDA
  if (src.device().is_cuda()) {
    auto ok = [](DType t) { return t == DType::f32 || t == DType::bf16; };
    NM_CHECK(ok(src.dtype()) && ok(dst.dtype()), "cast on CUDA: float32/bfloat16 only, {} -> {}",
             dtype_name(src.dtype()), dtype_name(dst.dtype()));
    CastCudaArgs g;
    g.src = src.raw(), g.dst = dst.raw(), g.n = src.numel();
    g.src_bf16 = src.dtype() == DType::bf16, g.dst_bf16 = dst.dtype() == DType::bf16;
    NM_CUDA_CHECK(cast_cuda(g, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(src, "cast");
  const void* s = src.raw();
  void* d = dst.raw();
  DType st = src.dtype(), dt = dst.dtype();
  cpu::parallel_for(src.numel(), [&](int64_t i) { put(d, dt, i, get(s, st, i)); }, 4096);
}

}  // namespace nemotron::ops
