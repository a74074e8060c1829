// GEMM and memory-bound kernel throughput on the GPU (a benchmark, not a test).
// usage: cuda_gemm [--tokens 8192] [--hidden 1024] [--ffn 4096] [--reps 20]
// Prints the measured bf16 GEMM ceiling (8192^3), ops::matmul TFLOP/s for a linear layer's
// forward, dx and dW forms (bf16 out, and float32 out with beta = 1 as dW accumulates), and the
// TB/s of the elementwise kernels on 256 MiB tensors against a device-to-device copy.
#include <chrono>
#include <cstdio>
#include <functional>

#include <CLI/CLI.hpp>

#include "gemm_peak.h"
#include "ops/activations.h"
#include "ops/bias.h"
#include "ops/cast.h"
#include "ops/elementwise.h"

using namespace nemotron;

namespace {

struct Gemm {
  const char* name;
  int64_t M, N, K;
  bool trans_a, trans_b;
};

void bench_gemms(Context& ctx, int64_t T, int64_t H, int64_t F, int reps, double peak) {
  // A linear layer H -> F (and its transpose F -> H): y = x W^T, dx = dy W, dW += dy^T x.
  const Gemm gemms[] = {
      {"fwd  y = x W^T   (up)", T, F, H, false, true},   {"dx   = dy W      (up)", T, H, F, false, false},
      {"dW  += dy^T x    (up)", F, H, T, true, false},   {"fwd  y = x W^T (down)", T, H, F, false, true},
      {"dx   = dy W    (down)", T, F, H, false, false},  {"dW  += dy^T x  (down)", H, F, T, true, false},
  };
  std::printf("\nops::matmul, bf16 inputs (M x N x K; %% of the %.0f TFLOP/s ceiling)\n", peak);
  std::printf("  %-24s %20s %18s %18s\n", "form", "M x N x K", "bf16 out", "f32 out, beta=1");
  for (const Gemm& g : gemms) {
    Tensor a = random_device_tensor(ctx, g.trans_a ? Shape{g.K, g.M} : Shape{g.M, g.K}, DType::bf16, 11);
    Tensor b = random_device_tensor(ctx, g.trans_b ? Shape{g.N, g.K} : Shape{g.K, g.N}, DType::bf16, 12);
    Tensor c16 = random_device_tensor(ctx, {g.M, g.N}, DType::bf16, 13);
    Tensor c32 = random_device_tensor(ctx, {g.M, g.N}, DType::f32, 14);
    const double flop = 2.0 * static_cast<double>(g.M) * static_cast<double>(g.N) * static_cast<double>(g.K);
    double ms16 = median_cuda_ms(ctx, reps, [&] { ops::matmul(ctx, a, g.trans_a, b, g.trans_b, c16); });
    double ms32 = median_cuda_ms(ctx, reps, [&] { ops::matmul(ctx, a, g.trans_a, b, g.trans_b, c32, 1.0, 1.0); });
    double tf16 = flop / (ms16 * 1e-3) / 1e12, tf32 = flop / (ms32 * 1e-3) / 1e12;
    std::printf("  %-24s %6ld x %5ld x %5ld %7.3f ms %4.0f TF (%3.0f%%) %6.3f ms %4.0f TF (%3.0f%%)\n", g.name,
                static_cast<long>(g.M), static_cast<long>(g.N), static_cast<long>(g.K), ms16, tf16,
                100 * tf16 / peak, ms32, tf32, 100 * tf32 / peak);
  }
  // float32 GEMM (no TF32), for the record: the float32 path is a correctness mode, not a fast one.
  const int64_t n = 4096;
  Tensor a = random_device_tensor(ctx, {n, n}, DType::f32, 21), b = random_device_tensor(ctx, {n, n}, DType::f32, 22);
  Tensor c = ctx.empty({n, n}, DType::f32);
  double ms = median_cuda_ms(ctx, 5, [&] { ops::matmul(ctx, a, false, b, true, c); });
  std::printf("  %-24s %6ld x %5ld x %5ld %7.3f ms %4.0f TF\n", "float32 (no TF32)", static_cast<long>(n),
              static_cast<long>(n), static_cast<long>(n), ms, 2.0 * n * n * n / (ms * 1e-3) / 1e12);
}

// Host cost of one cached ops::matmul call (tiny GEMM, so the launch path dominates).
void bench_call_overhead(Context& ctx) {
  Tensor a = random_device_tensor(ctx, {64, 64}, DType::bf16, 41), b = random_device_tensor(ctx, {64, 64}, DType::bf16, 42);
  Tensor c = ctx.empty({64, 64}, DType::bf16);
  const int calls = 2000;
  double ms = median_cuda_ms(ctx, 5, [&] {
    for (int i = 0; i < calls; ++i) ops::matmul(ctx, a, false, b, true, c);
  });
  std::printf("\n64^3 bf16 ops::matmul back to back: %.2f us per call (launch path with the plan cache)\n",
              ms * 1e3 / calls);
  // New shapes (MoE token counts change every step): the first of a size bucket queries the
  // heuristic, later ones reuse its algorithm after cuBLASLt checks it.
  Tensor x = random_device_tensor(ctx, {4096, 1024}, DType::bf16, 43), w = random_device_tensor(ctx, {512, 1024}, DType::bf16, 44);
  Tensor y = ctx.empty({4096, 512}, DType::bf16);
  std::vector<double> us;
  for (int64_t m = 3001; m <= 3064; ++m) {
    Tensor xm = x.slice(0, m), ym = y.slice(0, m);
    auto t0 = std::chrono::steady_clock::now();
    ops::matmul(ctx, xm, false, w, true, ym);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    cuda::cuda_backend(ctx).synchronize();
  }
  double rest = 0;
  for (size_t i = 1; i < us.size(); ++i) rest += us[i];
  std::printf("first call of a new shape: %.0f us with a heuristic query, %.0f us on average for the next %zu "
              "(same bucket)\n", us[0], rest / static_cast<double>(us.size() - 1), us.size() - 1);
}

void bench_memory(Context& ctx, int reps) {
  const int64_t bytes = int64_t{256} << 20, n16 = bytes / 2, n32 = bytes / 4, D = 4096;
  Tensor x = random_device_tensor(ctx, {n16 / D, D}, DType::bf16, 31);
  Tensor y = random_device_tensor(ctx, {n16 / D, D}, DType::bf16, 32);
  Tensor z = random_device_tensor(ctx, {n16 / D, D}, DType::bf16, 33);
  Tensor w = random_device_tensor(ctx, {n16 / D, D}, DType::bf16, 34);
  Tensor f = random_device_tensor(ctx, {n32 / D, D}, DType::f32, 35);
  Tensor f2 = random_device_tensor(ctx, {n32 / D, D}, DType::f32, 36);
  Tensor fz = ctx.empty({n32 / D, D}, DType::f32);
  Tensor b = random_device_tensor(ctx, {D}, DType::bf16, 37);
  Tensor db = ctx.zeros({D}, DType::f32);
  Tensor out = ctx.empty(x.shape(), DType::bf16), out2 = ctx.empty(x.shape(), DType::bf16);
  struct Row {
    const char* name;
    double bytes_moved;
    std::function<void()> fn;
  };
  const double B = static_cast<double>(bytes);
  Tensor f_bf = ctx.empty(f.shape(), DType::bf16);
  const Row rows[] = {
      {"copy (cudaMemcpy D2D)", 2 * B,
       [&] { NM_CUDA_CHECK(cudaMemcpyAsync(out.raw(), x.raw(), bytes, cudaMemcpyDeviceToDevice, cuda::cuda_stream(ctx))); }},
      {"add bf16", 3 * B, [&] { ops::add(ctx, x, y, out); }},
      {"add_inplace f32", 3 * B, [&] { ops::add_inplace(ctx, f, f2); }},
      {"scale_inplace bf16", 2 * B, [&] { ops::scale_inplace(ctx, z, 1.0000001); }},
      {"cast f32 -> bf16", 1.5 * B, [&] { ops::cast(ctx, f, f_bf); }},
      {"cast bf16 -> f32", 1.5 * B, [&] { ops::cast(ctx, f_bf, fz); }},
      {"bias_add bf16", 2 * B, [&] { ops::bias_add(ctx, z, b); }},
      {"bias_backward bf16", 1 * B, [&] { ops::bias_backward(ctx, x, db); }},
      {"relu2 fwd bf16", 2 * B, [&] { ops::relu2_forward(ctx, x, out); }},
      {"relu2 bwd bf16", 3 * B, [&] { ops::relu2_backward(ctx, x, y, out); }},
      {"swiglu fwd bf16", 3 * B, [&] { ops::swiglu_forward(ctx, x, y, out); }},
      {"swiglu bwd bf16", 5 * B, [&] { ops::swiglu_backward(ctx, x, y, w, out, out2); }},
  };
  double copy_tbs = 0;
  std::printf("\nmemory-bound kernels on 256 MiB tensors (bytes read + written; %% of the D2D copy)\n");
  for (const Row& r : rows) {
    double ms = median_cuda_ms(ctx, reps, r.fn);
    double tbs = r.bytes_moved / (ms * 1e-3) / 1e12;
    if (copy_tbs == 0) copy_tbs = tbs;
    std::printf("  %-24s %7.3f ms %6.2f TB/s (%3.0f%%)\n", r.name, ms, tbs, 100 * tbs / copy_tbs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t T = 8192, H = 1024, F = 4096;
  int reps = 20;
  CLI::App app{"CUDA GEMM and elementwise benchmark"};
  app.add_option("--tokens", T, "rows (tokens per micro-batch)");
  app.add_option("--hidden", H, "model width");
  app.add_option("--ffn", F, "the other side of the linear layer");
  app.add_option("--reps", reps, "timed repeats (median)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (cuda::device_count() == 0) {
      std::printf("cuda_gemm: no CUDA device visible\n");
      return 1;
    }
    cuda::CudaBackend backend(0);
    Context ctx{&backend, nullptr, DType::bf16};
    std::printf("device: %s\n", backend.name().c_str());
    double peak = measure_gemm_peak_tflops(ctx, 8192, reps);
    std::printf("bf16 GEMM ceiling: 8192^3 ops::matmul = %.0f TFLOP/s (median of %d)\n", peak, reps);
    bench_gemms(ctx, T, H, F, reps, peak);
    bench_call_overhead(ctx);
    bench_memory(ctx, reps);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_gemm: %s\n", e.what());
    return 1;
  }
  return 0;
}
