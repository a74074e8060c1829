// CPU references of fused_projection.h (and the dispatch to fused_projection_cuda.cu).
#include <cmath>
#include <cstring>

#include "backend/cpu/parallel.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/fused_projection.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/fused_projection_cuda.h"
#endif

namespace nemotron::ops {

namespace {

constexpr int64_t kGrain = 4096;  // elements per thread before going parallel

// As activations_cpu.cpp's, so swiglu_halves_forward matches swiglu_forward bit for bit.
template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

int64_t rows_of(const Tensor& y, const char* op) {
  NM_CHECK(y.defined() && y.rank() >= 1 && y.dim(-1) > 0, "{}: y {}", op, y.defined() ? y.describe() : "undefined");
  return y.numel() / y.dim(-1);
}

}  // namespace

void split_columns(Context& ctx, const Tensor& y, std::span<Tensor> outs) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const int64_t rows = rows_of(y, "split_columns"), total = y.dim(-1);
  NM_CHECK(!outs.empty() && outs.size() <= 4, "split_columns: 1..4 blocks, got {}", outs.size());
  int64_t sum = 0;
  for (const Tensor& o : outs) {
    NM_CHECK(o.defined() && o.rank() >= 1 && o.numel() == rows * o.dim(-1) && o.dtype() == y.dtype(),
             "split_columns: block {} for {} rows of {}", o.defined() ? o.describe() : "undefined", rows,
             y.describe());
    sum += o.dim(-1);
  }
  NM_CHECK(sum == total, "split_columns: block widths sum to {}, y is {} wide", sum, total);
#if NEMOTRON_CUDA
  if (y.device().is_cuda()) {
    NM_CHECK(y.dtype() == DType::f32 || y.dtype() == DType::bf16, "split_columns on CUDA: float32 or bfloat16, got {}",
             dtype_name(y.dtype()));
    SplitColumnsCudaArgs a;
    a.y = y.raw(), a.rows = rows, a.total = total, a.elem_bytes = y.dtype() == DType::bf16 ? 2 : 4;
    a.blocks = static_cast<int>(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) a.outs[i] = outs[i].raw(), a.widths[i] = outs[i].dim(-1);
    NM_CUDA_CHECK(split_columns_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(y, "split_columns");
  const size_t elem = dtype_size(y.dtype());
  const auto* src = static_cast<const char*>(y.raw());
  int64_t offset = 0;
  for (Tensor& o : outs) {
    const int64_t w = o.dim(-1);
    auto* dst = static_cast<char*>(o.raw());
    cpu::parallel_for(rows, [&](int64_t r) {
      std::memcpy(dst + static_cast<size_t>(r * w) * elem, src + static_cast<size_t>(r * total + offset) * elem,
                  static_cast<size_t>(w) * elem);
    }, std::max<int64_t>(1, kGrain / w));
    offset += w;
  }
}

void swiglu_halves_forward(Context& ctx, const Tensor& gate_up, Tensor& out) {
  OpScope scope(ctx, OpPhase::elementwise, __func__);
  const int64_t rows = rows_of(gate_up, "swiglu_halves_forward"), F = gate_up.dim(-1) / 2;
  NM_CHECK(gate_up.dim(-1) % 2 == 0 && out.defined() && out.dtype() == gate_up.dtype() && out.numel() == rows * F,
           "swiglu_halves_forward: gate_up {} -> out {}", gate_up.describe(), out.defined() ? out.describe() : "undefined");
#if NEMOTRON_CUDA
  if (gate_up.device().is_cuda()) {
    NM_CHECK(gate_up.dtype() == DType::f32 || gate_up.dtype() == DType::bf16,
             "swiglu_halves_forward on CUDA: float32 or bfloat16, got {}", dtype_name(gate_up.dtype()));
    SwigluHalvesCudaArgs a;
    a.gate_up = gate_up.raw(), a.out = out.raw(), a.rows = rows, a.F = F, a.bf16 = gate_up.dtype() == DType::bf16;
    NM_CUDA_CHECK(swiglu_halves_forward_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(gate_up, "swiglu_halves_forward");
  dispatch_float(gate_up.dtype(), "swiglu_halves_forward", [&](auto zero) {
    using T = decltype(zero);
    const T* gu = gate_up.data<T>();
    T* py = out.data<T>();
    cpu::parallel_for(rows * F, [&](int64_t i) {
      const int64_t r = i / F, f = i - r * F;
      const T g = gu[r * 2 * F + f], u = gu[r * 2 * F + F + f];
      py[i] = g * sigmoid(g) * u;
    }, kGrain);
  });
}

}  // namespace nemotron::ops
