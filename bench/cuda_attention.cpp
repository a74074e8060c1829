// Causal GQA flash attention on CUDA (bf16): forward and backward time and TFLOP/s at
// B=1, T=4096, nq=32, nkv=8 and 2, hd=128, then torch SDPA on the same shapes for comparison.
// usage: cuda_attention [path/to/cuda_attention_sdpa.py]   (default: next to this binary, then bench/)
// Causal FLOPs: forward 2 * 2 * B * nq * T^2 * hd / 2, backward 2.5x that (the dQ pass's
// recomputation is not counted). Ceiling: ~800 TFLOP/s, the measured bf16 GEMM peak of the H100.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "gemm_peak.h"
#include "core/rng.h"
#include "ops/attention.h"
#include "ops/attention_internal_cuda.h"

using namespace nemotron;

namespace {

constexpr double kCeilingTflops = 800.0;

Tensor random_bf16(Shape shape, uint64_t seed, cuda::CudaBackend& gpu) {
  Tensor t = Tensor::empty(shape, DType::f32);
  fill_uniform(t, Philox(seed), -1.0, 1.0);
  return t.to_host(DType::bf16).to(gpu);
}

void bench(cuda::CudaBackend& gpu, int64_t B, int64_t T, int64_t nq, int64_t nkv, int64_t hd) {
  Context ctx{&gpu, nullptr, DType::bf16};
  Tensor q = random_bf16({B, T, nq, hd}, 1, gpu), k = random_bf16({B, T, nkv, hd}, 2, gpu);
  Tensor v = random_bf16({B, T, nkv, hd}, 3, gpu), dout = random_bf16({B, T, nq, hd}, 4, gpu);
  Tensor o = ctx.empty(q.shape(), DType::bf16), lse = ctx.empty({B, nq, T}, DType::f32);
  Tensor dq = ctx.empty(q.shape(), DType::bf16), dk = ctx.empty(k.shape(), DType::bf16);
  Tensor dv = ctx.empty(v.shape(), DType::bf16);
  cudaStream_t s = gpu.stream();
  const double fwd_ms = median_cuda_ms(ctx, 20, [&] { ops::attention_forward(ctx, q, k, v, o, lse); });
  const double bwd_ms = median_cuda_ms(ctx, 20, [&] { ops::attention_backward(ctx, q, k, v, o, lse, dout, dq, dk, dv); });
  const double fwd_flops = 2.0 * B * nq * static_cast<double>(T) * T * hd, bwd_flops = 2.5 * fwd_flops;
  const double fwd_tf = fwd_flops / (fwd_ms * 1e9), bwd_tf = bwd_flops / (bwd_ms * 1e9);
  std::printf("ours  B=%ld T=%ld nq=%ld nkv=%ld hd=%ld bf16: forward %.3f ms %.1f TFLOP/s (%.0f%% of %.0f), "
              "backward %.3f ms %.1f TFLOP/s (%.0f%%)\n",
              (long)B, (long)T, (long)nq, (long)nkv, (long)hd, fwd_ms, fwd_tf, 100 * fwd_tf / kCeilingTflops,
              kCeilingTflops, bwd_ms, bwd_tf, 100 * bwd_tf / kCeilingTflops);
  // The forward's tile variants (16-row strips per warp), to check the default's choice.
  ops::AttentionCudaArgs a;
  a.q = q.raw(), a.k = k.raw(), a.v = v.raw(), a.o = o.raw(), a.lse = static_cast<float*>(lse.raw());
  a.B = B, a.T = T, a.nq = nq, a.nkv = nkv, a.hd = hd, a.bf16 = true;
  for (int strips : {1, 2}) {
    const double ms = median_cuda_ms(ctx, 20, [&] { ops::attn::flash_forward(a, s, strips); });
    std::printf("      forward variant strips/warp=%d: %.3f ms %.1f TFLOP/s\n", strips, ms, fwd_flops / (ms * 1e9));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda::device_count() == 0) {
    std::printf("cuda_attention: no CUDA device\n");
    return 0;
  }
  try {
    cuda::CudaBackend gpu(0);
    bench(gpu, 1, 4096, 32, 8, 128);
    bench(gpu, 1, 4096, 32, 2, 128);
    bench(gpu, 1, 4096, 32, 8, 64);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_attention: %s\n", e.what());
    return 1;
  }
  std::string script = argc > 1 ? argv[1] : "";
  if (script.empty()) {
    auto beside = std::filesystem::path(argv[0]).parent_path() / "cuda_attention_sdpa.py";
    script = std::filesystem::exists(beside) ? beside.string() : "bench/cuda_attention_sdpa.py";
  }
  std::fflush(stdout);
  return std::system(("python3 " + script).c_str()) == 0 ? 0 : 1;
}
