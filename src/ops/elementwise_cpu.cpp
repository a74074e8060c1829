#include "backend/cpu/parallel.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"

namespace nemotron::ops {

namespace {
constexpr int64_t kGrain = 4096;
}

void add(Context&, const Tensor& a, const Tensor& b, Tensor& out) {
  require_cpu(a, "add");
  NM_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), "add: {} + {} -> {}", a.describe(), b.describe(),
           out.describe());
  dispatch_float(a.dtype(), "add", [&](auto zero) {
    using T = decltype(zero);
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* po = out.data<T>();
    cpu::parallel_for(a.numel(), [&](int64_t i) { po[i] = pa[i] + pb[i]; }, kGrain);
  });
}

void add_inplace(Context&, Tensor& a, const Tensor& b) {
  require_cpu(a, "add_inplace");
  NM_CHECK(a.numel() == b.numel(), "add_inplace: {} += {}", a.describe(), b.describe());
  dispatch_float(a.dtype(), "add_inplace", [&](auto zero) {
    using T = decltype(zero);
    T* pa = a.data<T>();
    const T* pb = b.data<T>();
    cpu::parallel_for(a.numel(), [&](int64_t i) { pa[i] += pb[i]; }, kGrain);
  });
}

void scale_inplace(Context&, Tensor& a, double s) {
  require_cpu(a, "scale_inplace");
  dispatch_float(a.dtype(), "scale_inplace", [&](auto zero) {
    using T = decltype(zero);
    T* pa = a.data<T>();
    cpu::parallel_for(a.numel(), [&](int64_t i) { pa[i] *= static_cast<T>(s); }, kGrain);
  });
}

}  // namespace nemotron::ops
