#include <cmath>

#include "backend/cpu/parallel.h"
#include "core/host_waits.h"
#include "core/op_profiler.h"
#include "ops/cross_entropy.h"
#include "ops/dispatch.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/cross_entropy_cuda.h"
#endif

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

[[noreturn]] void throw_bad_label(int64_t y, int64_t n, int64_t V) {
  throw InputError(fmt::format("cross entropy: label {} at position {} is outside the vocabulary [0, {})", y, n, V));
}

void check_labels(const Tensor& targets, int64_t V) {
  for (int64_t n = 0; n < targets.numel(); ++n) {
    int64_t y = target_at(targets, n);
    if (y >= V) throw_bad_label(y, n, V);
  }
}

#if NEMOTRON_CUDA
void cross_entropy_cuda(Context& ctx, const Tensor& logits, const Tensor& targets, const Tensor& mask,
                        double grad_scale, Tensor& losses, Tensor* dlogits) {
  const DType dt = logits.dtype();
  NM_CHECK(dt == DType::f32 || dt == DType::bf16, "cross entropy on CUDA: float32 or bfloat16 logits, got {}",
           dtype_name(dt));
  expect_dtype(losses, stat_dtype(dt), "cross entropy losses on CUDA");
  if (dlogits) expect_dtype(*dlogits, dt, "cross entropy dlogits on CUDA");
  if (mask.defined())
    NM_CHECK(mask.dtype() == dt || mask.dtype() == DType::f32, "cross entropy mask: {} or float32, got {}",
             dtype_name(dt), dtype_name(mask.dtype()));
  Backend& dev = logits.backend();
  // Host labels are checked on the host; device labels by the kernel.
  if (!targets.device().is_cuda()) check_labels(targets, logits.dim(1));
  Tensor t = targets.device().is_cuda() ? targets : targets.to(dev);
  Tensor m = !mask.defined() || mask.device().is_cuda() ? mask : mask.to(dev);
  CrossEntropyCudaArgs a;
  a.logits = logits.raw(), a.dlogits = dlogits ? dlogits->raw() : nullptr;
  a.targets = t.raw(), a.targets64 = t.dtype() == DType::i64;
  a.mask = m.defined() ? m.raw() : nullptr, a.mask_f32 = m.defined() && m.dtype() == DType::f32;
  a.losses = static_cast<float*>(losses.raw());
  a.N = logits.dim(0), a.V = logits.dim(1), a.grad_scale = static_cast<float>(grad_scale), a.bf16 = dt == DType::bf16;
  int64_t bad = -1;
  NM_CUDA_CHECK(softmax_cross_entropy_cuda(a, cuda::cuda_stream(ctx), &bad));
  note_host_wait();
  if (bad >= 0) throw_bad_label(static_cast<int64_t>(t.slice(bad, bad + 1).to_f64_vector()[0]), bad, a.V);
}
#endif

}  // namespace

void softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& targets, const Tensor& mask,
                           double grad_scale, Tensor& losses, Tensor* dlogits) {
  OpScope scope(ctx, OpPhase::loss, __func__);
  NM_CHECK(logits.rank() == 2, "cross entropy logits must be [N, V], got {}", logits.shape().str());
  int64_t N = logits.dim(0), V = logits.dim(1);
  NM_CHECK(targets.numel() == N, "cross entropy: {} targets for {} rows", targets.numel(), N);
  NM_CHECK(targets.dtype() == DType::i32 || targets.dtype() == DType::i64, "cross entropy targets must be integers");
  if (mask.defined()) expect_shape(mask, {N}, "cross entropy mask");
  expect_shape(losses, {N}, "cross entropy losses");
  if (dlogits) expect_shape(*dlogits, logits.shape(), "cross entropy dlogits");
#if NEMOTRON_CUDA
  if (logits.device().is_cuda()) {
    cross_entropy_cuda(ctx, logits, targets, mask, grad_scale, losses, dlogits);
    return;
  }
#endif
  (void)ctx;
  require_cpu(logits, "softmax_cross_entropy");
  check_labels(targets, V);
  // A mask in another float dtype (float32 beside float64 logits) is converted once.
  Tensor m = mask.defined() && mask.dtype() != logits.dtype() ? mask.to_host(logits.dtype()) : mask;
  dispatch_float(logits.dtype(), "softmax_cross_entropy", [&](auto zero) {
    using T = decltype(zero);
    ce_ref<T>(logits.data<T>(), targets, m.defined() ? m.data<T>() : nullptr, static_cast<T>(grad_scale),
              losses.data<T>(), dlogits ? dlogits->data<T>() : nullptr, N, V);
  });
}

}  // namespace nemotron::ops
