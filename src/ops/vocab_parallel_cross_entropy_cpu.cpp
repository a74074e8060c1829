// The CPU reference of vocab_parallel_cross_entropy.h (float32/float64, plain loops per row) and
// the dispatch to its CUDA kernels. Shapes and dtypes are checked once here for both devices.
#include <cmath>
#include <limits>

#include "backend/cpu/parallel.h"
#include "core/host_waits.h"
#include "core/op_profiler.h"
#include "ops/dispatch.h"
#include "ops/vocab_parallel_cross_entropy.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "ops/vocab_parallel_cross_entropy_cuda.h"
#endif

namespace nemotron::ops {

namespace {

int64_t target_at(const Tensor& t, int64_t n) {
  return t.dtype() == DType::i32 ? t.data<int32_t>()[n] : t.data<int64_t>()[n];
}

[[noreturn]] void throw_bad_target(int64_t y, int64_t n, int64_t V) {
  throw InputError(
      fmt::format("vocab-parallel cross entropy: label {} at position {} is outside the vocabulary [0, {})", y, n, V));
}

void check_targets(const Tensor& targets, int64_t N, const char* what) {
  NM_CHECK(targets.numel() == N, "{}: {} targets for {} rows", what, targets.numel(), N);
  NM_CHECK(targets.dtype() == DType::i32 || targets.dtype() == DType::i64, "{}: targets must be int32 or int64, got {}",
           what, dtype_name(targets.dtype()));
}

void check_mask(const Tensor& mask, int64_t N, const char* what) {
  if (!mask.defined()) return;
  expect_shape(mask, {N}, what);
  NM_CHECK(is_float(mask.dtype()), "{}: the mask must be a float tensor, got {}", what, dtype_name(mask.dtype()));
}

// A mask in another float dtype than the CPU computes in (float32 beside float64) is converted once.
Tensor host_mask(const Tensor& mask, DType dtype) {
  return mask.defined() && mask.dtype() != dtype ? mask.to_host(dtype) : mask;
}

template <class T>
void stats_ref(const T* logits, const Tensor& targets, int64_t vocab_begin, T* stats, int64_t N, int64_t Vl) {
  cpu::parallel_for(N, [&](int64_t n) {
    const T* row = logits + n * Vl;
    T mx = row[0];
    for (int64_t j = 1; j < Vl; ++j) mx = std::max(mx, row[j]);
    T sum = 0;
    if (mx != -std::numeric_limits<T>::infinity())
      for (int64_t j = 0; j < Vl; ++j) sum += std::exp(row[j] - mx);
    const int64_t local = target_at(targets, n) - vocab_begin;
    stats[3 * n] = mx, stats[3 * n + 1] = sum, stats[3 * n + 2] = local >= 0 && local < Vl ? row[local] : T(0);
  }, 16);
}

template <class T>
void combine_ref(const T* gathered, const Tensor& targets, const T* mask, T* lse, T* losses, int64_t R, int64_t N) {
  cpu::parallel_for(N, [&](int64_t n) {
    T M = -std::numeric_limits<T>::infinity(), S = 0, t = 0;
    for (int64_t r = 0; r < R; ++r) M = std::max(M, gathered[(r * N + n) * 3]);
    for (int64_t r = 0; r < R; ++r) {
      const T* st = gathered + (r * N + n) * 3;
      if (st[0] != -std::numeric_limits<T>::infinity()) S += st[1] * std::exp(st[0] - M);  // an all -inf shard adds 0
      t += st[2];
    }
    lse[n] = M + std::log(S);
    losses[n] = target_at(targets, n) < 0 ? T(0) : (mask ? mask[n] : T(1)) * (lse[n] - t);
  }, 256);
}

template <class T>
void grad_ref(const T* logits, const Tensor& targets, const T* mask, const T* lse, int64_t vocab_begin, T scale,
              T* dlogits, int64_t N, int64_t Vl) {
  cpu::parallel_for(N, [&](int64_t n) {
    const T* row = logits + n * Vl;
    T* d = dlogits + n * Vl;
    const int64_t y = target_at(targets, n);
    const T g = y < 0 ? T(0) : scale * (mask ? mask[n] : T(1));
    for (int64_t j = 0; j < Vl; ++j) d[j] = g == T(0) ? T(0) : g * std::exp(row[j] - lse[n]);  // safe in place
    const int64_t local = y - vocab_begin;
    if (y >= 0 && local >= 0 && local < Vl) d[local] -= g;
  }, 4);
}

#if NEMOTRON_CUDA
VocabShardCudaArgs cuda_args(const Tensor& targets, const Tensor& mask, DType logits_dtype, const char* what) {
  NM_CHECK(logits_dtype == DType::f32 || logits_dtype == DType::bf16, "{} on CUDA: float32 or bfloat16, got {}", what,
           dtype_name(logits_dtype));
  NM_CHECK(targets.device().is_cuda(), "{} on CUDA: targets must be on the device, got {}", what,
           targets.describe());
  VocabShardCudaArgs a;
  a.targets = targets.raw(), a.targets64 = targets.dtype() == DType::i64;
  if (mask.defined()) {
    NM_CHECK(mask.device().is_cuda() && (mask.dtype() == DType::f32 || mask.dtype() == DType::bf16),
             "{} on CUDA: the mask must be a float32 or bfloat16 device tensor, got {}", what, mask.describe());
    a.mask = mask.raw(), a.mask_f32 = mask.dtype() == DType::f32;
  }
  a.bf16 = logits_dtype == DType::bf16;
  return a;
}

// Host targets and masks are uploaded (small: [N]); device ones are used as they are.
Tensor on_device(const Tensor& t, Backend& dev) { return !t.defined() || t.device().is_cuda() ? t : t.to(dev); }
#endif

}  // namespace

void vocab_shard_stats(Context& ctx, const Tensor& logits, const Tensor& targets, int64_t vocab_begin, Tensor& stats,
                       int64_t vocab_size) {
  OpScope scope(ctx, OpPhase::loss, __func__);
  const char* what = "vocab_shard_stats";
  NM_CHECK(logits.rank() == 2 && logits.dim(1) > 0, "{}: logits must be [N, Vl] with Vl > 0, got {}", what,
           logits.shape().str());
  const int64_t N = logits.dim(0), Vl = logits.dim(1);
  NM_CHECK(vocab_begin >= 0, "{}: vocab_begin {} is negative", what, vocab_begin);
  check_targets(targets, N, what);
  expect_shape(stats, {N, 3}, "vocab_shard_stats stats");
  expect_dtype(stats, stat_dtype(logits.dtype()), "vocab_shard_stats stats");
  const bool host_check = vocab_size > 0 && targets.device().is_cpu();
  if (host_check)
    for (int64_t n = 0; n < N; ++n)
      if (int64_t y = target_at(targets, n); y >= vocab_size) throw_bad_target(y, n, vocab_size);
#if NEMOTRON_CUDA
  if (logits.device().is_cuda()) {
    Tensor t = on_device(targets, logits.backend());
    VocabShardCudaArgs a = cuda_args(t, Tensor(), logits.dtype(), what);
    a.logits = logits.raw(), a.stats = static_cast<float*>(stats.raw());
    a.N = N, a.Vl = Vl, a.vocab_begin = vocab_begin, a.vocab_size = host_check ? 0 : vocab_size;
    int64_t bad = -1;
    NM_CUDA_CHECK(vocab_shard_stats_cuda(a, cuda::cuda_stream(ctx), &bad));
    if (a.vocab_size > 0) note_host_wait();  // the range check's read-back
    if (bad >= 0) throw_bad_target(static_cast<int64_t>(t.slice(bad, bad + 1).to_f64_vector()[0]), bad, vocab_size);
    return;
  }
#endif
  require_cpu(logits, what);
  dispatch_float(logits.dtype(), what, [&](auto zero) {
    using T = decltype(zero);
    stats_ref<T>(logits.data<T>(), targets, vocab_begin, stats.data<T>(), N, Vl);
  });
}

void vocab_shard_combine(Context& ctx, const Tensor& gathered, const Tensor& targets, const Tensor& mask, Tensor& lse,
                         Tensor& losses) {
  OpScope scope(ctx, OpPhase::loss, __func__);
  const char* what = "vocab_shard_combine";
  NM_CHECK(gathered.rank() == 3 && gathered.dim(0) > 0 && gathered.dim(2) == 3,
           "{}: gathered stats must be [T, N, 3] with T > 0, got {}", what, gathered.shape().str());
  const int64_t R = gathered.dim(0), N = gathered.dim(1);
  check_targets(targets, N, what);
  check_mask(mask, N, "vocab_shard_combine mask");
  expect_shape(lse, {N}, "vocab_shard_combine lse");
  expect_shape(losses, {N}, "vocab_shard_combine losses");
  expect_dtype(lse, gathered.dtype(), "vocab_shard_combine lse");
  expect_dtype(losses, gathered.dtype(), "vocab_shard_combine losses");
#if NEMOTRON_CUDA
  if (gathered.device().is_cuda()) {
    expect_dtype(gathered, DType::f32, "vocab_shard_combine gathered stats on CUDA");
    Backend& dev = gathered.backend();
    Tensor t = on_device(targets, dev), m = on_device(mask, dev);
    VocabShardCudaArgs a = cuda_args(t, m, DType::f32, what);
    a.gathered = static_cast<const float*>(gathered.raw());
    a.lse = static_cast<float*>(lse.raw()), a.losses = static_cast<float*>(losses.raw());
    a.N = N, a.shards = R;
    NM_CUDA_CHECK(vocab_shard_combine_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(gathered, what);
  Tensor m = host_mask(mask, gathered.dtype());
  dispatch_float(gathered.dtype(), what, [&](auto zero) {
    using T = decltype(zero);
    combine_ref<T>(gathered.data<T>(), targets, m.defined() ? m.data<T>() : nullptr, lse.data<T>(), losses.data<T>(),
                   R, N);
  });
}

void vocab_shard_grad(Context& ctx, const Tensor& logits, const Tensor& targets, const Tensor& mask, const Tensor& lse,
                      int64_t vocab_begin, double grad_scale, Tensor& dlogits) {
  OpScope scope(ctx, OpPhase::loss, __func__);
  const char* what = "vocab_shard_grad";
  NM_CHECK(logits.rank() == 2, "{}: logits must be [N, Vl], got {}", what, logits.shape().str());
  const int64_t N = logits.dim(0), Vl = logits.dim(1);
  check_targets(targets, N, what);
  check_mask(mask, N, "vocab_shard_grad mask");
  expect_shape(lse, {N}, "vocab_shard_grad lse");
  expect_dtype(lse, stat_dtype(logits.dtype()), "vocab_shard_grad lse");
  expect_shape(dlogits, logits.shape(), "vocab_shard_grad dlogits");
  expect_dtype(dlogits, logits.dtype(), "vocab_shard_grad dlogits");
#if NEMOTRON_CUDA
  if (logits.device().is_cuda()) {
    Backend& dev = logits.backend();
    Tensor t = on_device(targets, dev), m = on_device(mask, dev);
    VocabShardCudaArgs a = cuda_args(t, m, logits.dtype(), what);
    a.logits = logits.raw(), a.dlogits = dlogits.raw(), a.lse = static_cast<float*>(lse.raw());
    a.N = N, a.Vl = Vl, a.vocab_begin = vocab_begin, a.grad_scale = static_cast<float>(grad_scale);
    NM_CUDA_CHECK(vocab_shard_grad_cuda(a, cuda::cuda_stream(ctx)));
    return;
  }
#endif
  require_cpu(logits, what);
  Tensor m = host_mask(mask, logits.dtype());
  dispatch_float(logits.dtype(), what, [&](auto zero) {
    using T = decltype(zero);
    grad_ref<T>(logits.data<T>(), targets, m.defined() ? m.data<T>() : nullptr, lse.data<T>(), vocab_begin,
                static_cast<T>(grad_scale), dlogits.data<T>(), N, Vl);
  });
}

}  // namespace nemotron::ops
