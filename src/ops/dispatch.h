// Shared plumbing for ops: pick the CPU template instance for a float dtype, and refuse a device
// the op has no kernel for with a message that names the op.
#pragma once
#include "core/error.h"
#include "core/tensor.h"

namespace nemotron::ops {

// Calls f(T{}) with T = float or double according to `dtype`.
template <class F>
void dispatch_float(DType dtype, const char* op, F&& f) {
  if (dtype == DType::f32) {
    f(float{});
  } else if (dtype == DType::f64) {
    f(double{});
  } else {
    throw Error(fmt::format("{}: the CPU reference computes in float32 or float64, got {}", op, dtype_name(dtype)));
  }
}

// Throws unless `t` lives on the CPU (used until an op's CUDA kernel exists).
inline void require_cpu(const Tensor& t, const char* op) {
  if (!t.device().is_cpu()) throw Error(fmt::format("{}: no kernel for {} tensors yet", op, t.device().str()));
}

}  // namespace nemotron::ops
