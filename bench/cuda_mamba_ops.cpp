// Bandwidth of the Mamba-2 mixer's elementwise/conv kernels on one GPU (a benchmark, not a test):
// causal_conv1d (whole, per part, and the three parts in one call as the mixer makes it),
// dt_softplus, gated_rmsnorm and mamba_a, forward and backward, at the mixer's
// shapes (B=2, T=4096, xBC width C = d + 2 G N = 4096 + 2*8*128, K=4, nH=64, d=4096, G=8), bf16;
// and the layers' rmsnorm (backward with a residual gradient) 768 and 2048 wide over 2B x T rows.
// Bytes = the op's main tensors read + written once; the ceiling is a device-to-device copy
// measured here. Median of repeats of a batch of calls after warm-up, random non-zero data.
#include <cstdio>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/rng.h"
#include "ops/causal_conv1d.h"
#include "ops/dt_softplus.h"
#include "ops/gated_rmsnorm.h"
#include "ops/rmsnorm.h"
#include "ops/mamba_a.h"

using namespace nemotron;

namespace {

constexpr int kBatch = 20, kRepeats = 9;

// Median milliseconds per call of fn over kRepeats batches of kBatch calls (after a warm-up batch).
double time_ms(cudaStream_t s, const std::function<void()>& fn) {
  cudaEvent_t a, b;
  NM_CUDA_CHECK(cudaEventCreate(&a));
  NM_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < kBatch; ++i) fn();
  std::vector<double> ms;
  for (int r = 0; r < kRepeats; ++r) {
    NM_CUDA_CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < kBatch; ++i) fn();
    NM_CUDA_CHECK(cudaEventRecord(b, s));
    NM_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    NM_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t / kBatch);
  }
  NM_CUDA_CHECK(cudaEventDestroy(a));
  NM_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

Tensor random(Context& ctx, Shape shape, DType dtype, double lo, double hi, uint64_t stream) {
  Tensor t = Tensor::empty(std::move(shape), dtype, *ctx.backend);
  fill_uniform(t, Philox(2024, stream), lo, hi);
  return t;
}

// Runs fn (which accumulates into g) twice from zero and reports whether both results match bitwise.
bool bitwise_repeatable(Tensor& g, const std::function<void()>& fn) {
  g.zero_();
  fn();
  Tensor first = g.to_host(DType::f32);
  g.zero_();
  fn();
  Tensor second = g.to_host(DType::f32);
  return std::equal(first.data<float>(), first.data<float>() + first.numel(), second.data<float>(),
                    [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; });
}

struct Report {
  double copy_tbps = 0;
  void row(const std::string& name, double ms, double bytes) const {
    double tbps = bytes / (ms * 1e-3) / 1e12;
    std::printf("%-44s %9.1f us %8.1f MB %7.2f TB/s %6.1f%% of copy\n", name.c_str(), ms * 1e3, bytes / 1e6, tbps,
                100.0 * tbps / copy_tbps);
  }
};

}  // namespace

int main() {
  try {
    if (cuda::device_count() == 0) {
      std::printf("cuda_mamba_ops: no CUDA device visible\n");
      return 0;
    }
    cuda::CudaBackend gpu(0);
    Context ctx{&gpu, nullptr, DType::bf16};
    cudaStream_t s = gpu.stream();
    const int64_t B = 2, T = 4096, d = 4096, G = 8, N = 128, C = d + 2 * G * N, K = 4, nH = 64;
    const DType bf = DType::bf16, f32 = DType::f32;
    std::printf("cuda_mamba_ops: %s, B=%ld T=%ld C=%ld K=%ld nH=%ld d=%ld G=%ld, bfloat16\n", gpu.name().c_str(), B,
                T, C, K, nH, d, G);

    Report rep;
    {  // the ceiling: a 1 GiB device-to-device copy (read + write)
      const size_t bytes = size_t{1} << 30;
      Tensor src = Tensor::zeros({static_cast<int64_t>(bytes)}, DType::bf16, gpu);  // 2 GiB, half copied
      Tensor dst = Tensor::empty({static_cast<int64_t>(bytes / 2)}, DType::bf16, gpu);
      double ms = time_ms(s, [&] { NM_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), bytes, cudaMemcpyDeviceToDevice, s)); });
      rep.copy_tbps = 2.0 * bytes / (ms * 1e-3) / 1e12;
      std::printf("%-44s %9.1f us %8.1f MB %7.2f TB/s (ceiling)\n", "device copy 1 GiB", ms * 1e3, 2.0 * bytes / 1e6,
                  rep.copy_tbps);
    }

    // causal_conv1d on the whole xBC width, then on the model's x and B/C parts.
    for (int64_t c : {C, d, G * N}) {
      Tensor x = random(ctx, {B, T, c}, bf, -1, 1, 1), w = random(ctx, {c, 1, K}, bf, -0.5, 0.5, 2);
      Tensor bias = random(ctx, {c}, bf, -0.5, 0.5, 3), dy = random(ctx, {B, T, c}, bf, -1, 1, 4);
      Tensor y = Tensor::empty({B, T, c}, bf, gpu), dx = Tensor::empty({B, T, c}, bf, gpu);
      Tensor dw = Tensor::zeros({c, 1, K}, f32, gpu), db = Tensor::zeros({c}, f32, gpu);
      const double n = static_cast<double>(B * T * c);
      std::string tag = "C=" + std::to_string(c);
      rep.row("causal_conv1d forward " + tag, time_ms(s, [&] { ops::causal_conv1d_forward(ctx, x, w, bias, y); }),
              2 * n * 2);
      rep.row("causal_conv1d backward " + tag,
              time_ms(s, [&] { ops::causal_conv1d_backward(ctx, x, w, bias, dy, dx, dw, db); }), 3 * n * 2);
      std::printf("  dw bitwise repeatable: %s\n",
                  bitwise_repeatable(dw, [&] { ops::causal_conv1d_backward(ctx, x, w, bias, dy, dx, dw, db); })
                      ? "yes" : "NO");
    }

    {  // the model's call: x, B and C as three tensors in one launch (the same bytes as C above)
      const int64_t widths[3] = {d, G * N, G * N};
      Tensor xs[3], ys[3], dys[3], dxs[3];
      for (int p = 0; p < 3; ++p) {
        xs[p] = random(ctx, {B, T, widths[p]}, bf, -1, 1, 11 + p), dys[p] = random(ctx, {B, T, widths[p]}, bf, -1, 1, 21 + p);
        ys[p] = Tensor::empty({B, T, widths[p]}, bf, gpu), dxs[p] = Tensor::empty({B, T, widths[p]}, bf, gpu);
      }
      Tensor w = random(ctx, {C, 1, K}, bf, -0.5, 0.5, 2), bias = random(ctx, {C}, bf, -0.5, 0.5, 3);
      Tensor dw = Tensor::zeros({C, 1, K}, f32, gpu), db = Tensor::zeros({C}, f32, gpu);
      const double n = static_cast<double>(B * T * C);
      rep.row("causal_conv1d forward parts x/B/C", time_ms(s, [&] { ops::causal_conv1d_forward_parts(ctx, xs, w, bias, ys); }),
              2 * n * 2);
      rep.row("causal_conv1d backward parts x/B/C",
              time_ms(s, [&] { ops::causal_conv1d_backward_parts(ctx, xs, w, bias, dys, dxs, dw, db); }), 3 * n * 2);
    }

    {  // dt_softplus: dt_raw, d_dt_raw bf16; dt, ddt float32
      Tensor raw = random(ctx, {B, T, nH}, bf, -2, 2, 5), bias = random(ctx, {nH}, bf, -3, -1, 6);
      Tensor ddt = random(ctx, {B, T, nH}, f32, -1, 1, 7);
      Tensor dt = Tensor::empty({B, T, nH}, f32, gpu), draw = Tensor::empty({B, T, nH}, bf, gpu);
      Tensor db = Tensor::zeros({nH}, f32, gpu);
      const double n = static_cast<double>(B * T * nH);
      rep.row("dt_softplus forward", time_ms(s, [&] { ops::dt_softplus_forward(ctx, raw, bias, 0.0, 1e30, dt); }),
              n * (2 + 4));
      rep.row("dt_softplus backward",
              time_ms(s, [&] { ops::dt_softplus_backward(ctx, raw, bias, 0.0, 1e30, ddt, draw, db); }), n * (2 + 4 + 2));
      std::printf("  d_dt_bias bitwise repeatable: %s\n",
                  bitwise_repeatable(db, [&] { ops::dt_softplus_backward(ctx, raw, bias, 0.0, 1e30, ddt, draw, db); })
                      ? "yes" : "NO");
    }

    {  // gated_rmsnorm over d with G groups
      Tensor y = random(ctx, {B, T, d}, bf, -1, 1, 8), z = random(ctx, {B, T, d}, bf, -2, 2, 9);
      Tensor w = random(ctx, {d}, bf, 0.5, 1.5, 10), dout = random(ctx, {B, T, d}, bf, -1, 1, 11);
      Tensor out = Tensor::empty({B, T, d}, bf, gpu), rstd = Tensor::empty({B * T, G}, f32, gpu);
      Tensor dy = Tensor::empty({B, T, d}, bf, gpu), dz = Tensor::empty({B, T, d}, bf, gpu);
      Tensor dw = Tensor::zeros({d}, f32, gpu);
      const double n = static_cast<double>(B * T * d);
      rep.row("gated_rmsnorm forward",
              time_ms(s, [&] { ops::gated_rmsnorm_forward(ctx, y, z, w, G, 1e-5, out, rstd); }), 3 * n * 2);
      ops::gated_rmsnorm_forward(ctx, y, z, w, G, 1e-5, out, rstd);
      rep.row("gated_rmsnorm backward",
              time_ms(s, [&] { ops::gated_rmsnorm_backward(ctx, y, z, w, rstd, G, dout, dy, dz, dw); }), 5 * n * 2);
      std::printf("  dw bitwise repeatable: %s\n",
                  bitwise_repeatable(dw, [&] { ops::gated_rmsnorm_backward(ctx, y, z, w, rstd, G, dout, dy, dz, dw); })
                      ? "yes" : "NO");
    }

    for (int64_t h : {int64_t{768}, int64_t{2048}}) {  // rmsnorm around each layer: 2B x T rows (the dense step's)
      const int64_t rows = 2 * B * T;
      Tensor x = random(ctx, {rows, h}, bf, -1, 1, 14), w = random(ctx, {h}, bf, 0.5, 1.5, 15);
      Tensor dy = random(ctx, {rows, h}, bf, -1, 1, 16), add = random(ctx, {rows, h}, bf, -1, 1, 17);
      Tensor y = Tensor::empty({rows, h}, bf, gpu), rstd = Tensor::empty({rows}, f32, gpu);
      Tensor dx = Tensor::empty({rows, h}, bf, gpu), dw = Tensor::zeros({h}, f32, gpu);
      const double n = static_cast<double>(rows * h);
      const std::string tag = "H=" + std::to_string(h);
      rep.row("rmsnorm forward " + tag, time_ms(s, [&] { ops::rmsnorm_forward(ctx, x, w, 1e-5, y, rstd); }), 2 * n * 2);
      rep.row("rmsnorm backward (+ residual grad) " + tag,
              time_ms(s, [&] { ops::rmsnorm_backward(ctx, x, w, rstd, dy, dx, dw, &add); }), 4 * n * 2);
      std::printf("  dw bitwise repeatable: %s\n",
                  bitwise_repeatable(dw, [&] { ops::rmsnorm_backward(ctx, x, w, rstd, dy, dx, dw, &add); }) ? "yes" : "NO");
    }

    {  // mamba_a: nH scalars, launch-bound
      Tensor a_log = random(ctx, {nH}, bf, -1, 2, 12), dA = random(ctx, {nH}, f32, -1, 1, 13);
      Tensor A = Tensor::empty({nH}, f32, gpu), g = Tensor::zeros({nH}, f32, gpu);
      rep.row("mamba_a forward", time_ms(s, [&] { ops::mamba_a_forward(ctx, a_log, A); }), nH * (2 + 4));
      rep.row("mamba_a backward", time_ms(s, [&] { ops::mamba_a_backward(ctx, A, dA, g); }), nH * 16);
    }
    NM_CUDA_CHECK(cudaStreamSynchronize(s));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_mamba_ops: %s\n", e.what());
    return 1;
  }
  return 0;
}

