#include <cmath>

#include "backend/cpu/parallel.h"
#include "ops/cross_entropy.h"
#include "ops/dispatch.h"

namespace nemotron::ops {

namespace {

int64_t target_at(const Tensor& t, int64_t n) {
  return t.dtype() == DType::i32 ? t.data<int32_t>()[n] : t.data<int64_t>()[n];
}

template <class T>
void ce_ref(const T* logits, const Tensor& targets, const T* mask, T scale, T* losses, T* dlogits, int64_t N,
            int64_t V) {
  cpu::parallel_for(N, [&](int64_t n) {
    const T* row = logits + n * V;
    int64_t y = target_at(targets, n);
    T m = (y < 0) ? T(0) : (mask ? mask[n] : T(1));
    T mx = row[0];
    for (int64_t v = 1; v < V; ++v) mx = std::max(mx, row[v]);
    T sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
    T lse = mx + std::log(sum);
    losses[n] = y < 0 ? T(0) : m * (lse - row[y]);
    if (dlogits) {
      T* d = dlogits + n * V;
      T g = scale * m;
      for (int64_t v = 0; v < V; ++v) d[v] = g * std::exp(row[v] - lse);  // safe when d aliases row
      if (y >= 0) d[y] -= g;
    }
  }, 4);
}

}  // namespace

void softmax_cross_entropy(Context&, const Tensor& logits, const Tensor& targets, const Tensor& mask,
                           double grad_scale, Tensor& losses, Tensor* dlogits) {
  require_cpu(logits, "softmax_cross_entropy");
  NM_CHECK(logits.rank() == 2, "cross entropy logits must be [N, V], got {}", logits.shape().str());
  int64_t N = logits.dim(0), V = logits.dim(1);
  NM_CHECK(targets.numel() == N, "cross entropy: {} targets for {} rows", targets.numel(), N);
  NM_CHECK(targets.dtype() == DType::i32 || targets.dtype() == DType::i64, "cross entropy targets must be integers");
  for (int64_t n = 0; n < N; ++n) {
    int64_t y = target_at(targets, n);
    if (y >= V) throw InputError(fmt::format("cross entropy: label {} at position {} is outside the vocabulary [0, {})", y, n, V));
  }
  if (mask.defined()) expect_shape(mask, {N}, "cross entropy mask");
  expect_shape(losses, {N}, "cross entropy losses");
  if (dlogits) expect_shape(*dlogits, logits.shape(), "cross entropy dlogits");
  dispatch_float(logits.dtype(), "softmax_cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    ce_ref<T>(logits.data<T>(), targets, mask.defined() ? mask.data<T>() : nullptr, static_cast<T>(grad_scale),
              losses.data<T>(), dlogits ? dlogits->data<T>() : nullptr, N, V);
  });
}

}  // namespace nemotron::ops
