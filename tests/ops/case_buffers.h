// Buffers that make op cases strict. Outputs start as NaN, so an element a kernel never writes
// fails the comparison instead of passing on a leftover value. Accumulated parameter gradients
// (+=) start at kGradStart, so a kernel that overwrites instead of adding fails too; the case
// subtracts it again before returning the gradient.
#pragma once
#include <limits>
#include <vector>

#include "core/context.h"

namespace nemotron::testing {

inline constexpr double kGradStart = 0.25;

inline Tensor filled(Context& ctx, const Shape& shape, DType dtype, double value) {
  std::vector<double> v(static_cast<size_t>(shape.numel()), value);
  return Tensor::from_vector<double>(shape, v).to_host(dtype).to(*ctx.backend);
}

inline Tensor poisoned(Context& ctx, const Shape& shape, DType dtype) {
  return filled(ctx, shape, dtype, std::numeric_limits<double>::quiet_NaN());
}

// A parameter-gradient buffer (grad_dtype of the compute dtype) holding kGradStart.
inline Tensor grad_buffer(Context& ctx, const Shape& shape, DType compute) {
  return filled(ctx, shape, grad_dtype(compute), kGradStart);
}

// What the op added to a grad_buffer, as a host float64 tensor.
inline Tensor accumulated(const Tensor& g) {
  Tensor h = g.to_host(DType::f64);
  double* p = h.data<double>();
  for (int64_t i = 0; i < h.numel(); ++i) p[i] -= kGradStart;
  return h;
}

}  // namespace nemotron::testing
