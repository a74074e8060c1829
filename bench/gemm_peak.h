// Benchmark helpers for CUDA: random device tensors, CUDA-event timing (median of repeats), and
// the measured bf16 GEMM ceiling that the train-step benchmark uses as its MFU denominator, and the
// device-to-device copy bandwidth that memory-bound figures are taken against.
// Header-only so each bench/*.cpp executable can include it.
#pragma once
#if NEMOTRON_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/rng.h"
#include "ops/matmul.h"

namespace nemotron {

// U(lo, hi) values on the context's device (never zero-filled): a host block of random values
// tiled over the tensor, since drawing hundreds of millions of values on the host is slow.
inline Tensor random_device_tensor(Context& ctx, Shape shape, DType dtype, uint64_t seed, double lo = -1.0,
                                   double hi = 1.0) {
  Tensor t = ctx.empty(shape, dtype);
  const int64_t n = t.numel(), block = std::min<int64_t>(n, int64_t{1} << 22);
  if (n == 0) return t;
  Tensor host = Tensor::empty({block}, DType::f64);
  fill_uniform(host, Philox(seed), lo, hi);
  Tensor tile = host.to_host(dtype).to(*ctx.backend);
  const size_t elem = dtype_size(dtype);
  cudaStream_t s = cuda::cuda_stream(ctx);
  for (int64_t i = 0; i < n; i += block)
    NM_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(t.raw()) + i * elem, tile.raw(),
                                  static_cast<size_t>(std::min(block, n - i)) * elem, cudaMemcpyDeviceToDevice, s));
  NM_CUDA_CHECK(cudaStreamSynchronize(s));
  return t;
}

// Median milliseconds of fn() on the context's stream over `reps` runs, after `warmup` runs.
template <class F>
double median_cuda_ms(Context& ctx, int reps, F&& fn, int warmup = 3) {
  cudaStream_t s = cuda::cuda_stream(ctx);
  for (int i = 0; i < warmup; ++i) fn();
  cudaEvent_t start, stop;
  NM_CUDA_CHECK(cudaEventCreate(&start));
  NM_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms(static_cast<size_t>(std::max(reps, 1)));
  for (float& m : ms) {
    NM_CUDA_CHECK(cudaEventRecord(start, s));
    fn();
    NM_CUDA_CHECK(cudaEventRecord(stop, s));
    NM_CUDA_CHECK(cudaEventSynchronize(stop));
    NM_CUDA_CHECK(cudaEventElapsedTime(&m, start, stop));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// TFLOP/s of a bfloat16 n x n x n ops::matmul (bf16 out) on random data: the practical ceiling.
inline double measure_gemm_peak_tflops(Context& ctx, int64_t n = 8192, int reps = 20) {
  Tensor a = random_device_tensor(ctx, {n, n}, DType::bf16, 1);
  Tensor b = random_device_tensor(ctx, {n, n}, DType::bf16, 2);
  Tensor c = ctx.empty({n, n}, DType::bf16);
  double ms = median_cuda_ms(ctx, reps, [&] { ops::matmul(ctx, a, false, b, true, c); }, 5);
  return 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n) / (ms * 1e-3) / 1e12;
}

// TB/s of a device-to-device copy of `bytes` (read + written): the practical memory ceiling that
// memory-bound figures are taken against.
inline double measure_copy_tbs(Context& ctx, int64_t bytes = int64_t{1} << 30, int reps = 20) {
  Tensor src = random_device_tensor(ctx, {bytes / 2}, DType::bf16, 3), dst = ctx.empty({bytes / 2}, DType::bf16);
  cudaStream_t s = cuda::cuda_stream(ctx);
  const double ms = median_cuda_ms(ctx, reps, [&] {
    NM_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, s));
  });
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e12;
}

}  // namespace nemotron
#endif  // NEMOTRON_CUDA
