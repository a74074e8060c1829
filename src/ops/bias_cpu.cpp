#include <algorithm>

#include "backend/cpu/parallel.h"
#include "ops/bias.h"
#include "ops/dispatch.h"

namespace nemotron::ops {

void bias_add(Context&, Tensor& y, const Tensor& b) {
  require_cpu(y, "bias_add");
  const int64_t D = y.dim(-1), rows = y.numel() / D;
  expect_shape(b, {D}, "bias");
  expect_dtype(b, y.dtype(), "bias");
  dispatch_float(y.dtype(), "bias_add", [&](auto zero) {
    using T = decltype(zero);
    T* py = y.data<T>();
    const T* pb = b.data<T>();
    cpu::parallel_for(rows, [&](int64_t r) {
      for (int64_t i = 0; i < D; ++i) py[r * D + i] += pb[i];
    }, std::max<int64_t>(1, 16384 / D));  // keep tiny shapes on one thread
  });
}

void bias_backward(Context&, const Tensor& dy, Tensor& db) {
  require_cpu(dy, "bias_backward");
  const int64_t D = dy.dim(-1), rows = dy.numel() / D;
  expect_shape(db, {D}, "bias gradient");
  expect_dtype(db, dy.dtype(), "bias gradient");
  dispatch_float(dy.dtype(), "bias_backward", [&](auto zero) {
    using T = decltype(zero);
    const T* g = dy.data<T>();
    T* out = db.data<T>();
    // Serial over rows: a fixed summation order keeps the result bitwise reproducible.
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < D; ++i) out[i] += g[r * D + i];
  });
}

}  // namespace nemotron::ops
