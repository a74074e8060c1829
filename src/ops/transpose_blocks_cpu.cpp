#include <cstring>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/transpose_blocks.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/transpose_blocks_cuda.h"
#endif

namespace nemotron::ops {

void transpose_blocks(Context& ctx, const Tensor& in, int64_t A, int64_t B, Tensor& out) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  NM_CHECK(A > 0 && B > 0 && in.numel() % (A * B) == 0, "transpose_blocks: {} is not [{}, {}, C]", in.describe(), A, B);
  NM_CHECK(out.numel() == in.numel() && out.dtype() == in.dtype(), "transpose_blocks: {} -> {}", in.describe(),
           out.describe());
  NM_CHECK(in.device() == out.device(), "transpose_blocks: {} and {} on different devices", in.describe(),
           out.describe());
  const size_t block = static_cast<size_t>(in.numel() / (A * B)) * dtype_size(in.dtype());
#if NEMOTRON_CUDA
  if (in.device().is_cuda()) {
    NM_CUDA_CHECK(transpose_blocks_cuda(in.raw(), out.raw(), A, B, static_cast<int64_t>(block), cuda::cuda_stream(ctx)));
    return;
  }
#endif
  NM_CHECK(in.device().is_cpu(), "transpose_blocks: no kernel for {} tensors", in.device().str());
  const char* src = static_cast<const char*>(in.raw());
  char* dst = static_cast<char*>(out.raw());
  cpu::parallel_for(A * B, [&](int64_t i) {  // i = b * A + a: destination order
    const int64_t b = i / A, a = i % A;
    std::memcpy(dst + static_cast<size_t>(i) * block, src + static_cast<size_t>(a * B + b) * block, block);
  }, 1);
}

}  // namespace nemotron::ops
