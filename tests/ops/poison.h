// Output tensors filled with NaN before an op writes them: an element the op leaves unwritten
// stays NaN and fails the comparison with the reference.
#pragma once
#include <cmath>

#include "core/context.h"

namespace nemotron::testing {

inline Tensor poisoned(const Context& ctx, const Shape& shape, DType dtype) {
  Tensor h = Tensor::empty(shape, DType::f64);
  double* p = h.data<double>();
  for (int64_t i = 0; i < h.numel(); ++i) p[i] = NAN;
  return h.to_host(dtype).to(*ctx.backend);
}

}  // namespace nemotron::testing
