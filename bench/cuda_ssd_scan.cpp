// Chunked SSD scan forward and backward on the GPU (a benchmark, not a test), bf16 activations.
// usage: cuda_ssd_scan [B T nH P G N Q]   (default: the dense and MoE training shapes with their
// per-kernel times, then B=2 T=4096 nH=64 G=8 at Q = 128, 64, 256)
//        cuda_ssd_scan once B T nH P G N Q   (one forward and one backward: for a profiler)
//        --step-ms MS --layers L (anywhere, with a shape B..Q): also print the scan's share of a training step of MS
//        milliseconds with L Mamba layers (one forward and one backward each), e.g. the dense
//        shape's step from bench/cuda_train_step: --step-ms 47.7 --layers 9
// Prints the median time, TFLOP/s of the chunked algorithm's matmul FLOPs (formula printed) and
// the bytes of the inputs/outputs against the copy bandwidth.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "core/rng.h"
#include "ops/ssd_scan_cuda.h"

using namespace nemotron;

namespace {

constexpr double kPeakTflops = 800.0;  // measured dense bf16 GEMM (H100 and H200 alike)
constexpr double kPeakTBs = 4.5;       // measured copy bandwidth of the H200

double g_step_ms = 0;  // --step-ms / --layers: the step the scan's share is printed against
int g_layers = 0;

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorString(e_));              \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

template <class T>
T* upload(const std::vector<float>& h) {
  std::vector<T> v(h.size());
  for (size_t i = 0; i < h.size(); ++i) v[i] = static_cast<T>(h[i]);
  T* d = nullptr;
  CHECK(cudaMalloc(reinterpret_cast<void**>(&d), v.size() * sizeof(T)));
  CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

std::vector<float> random(int64_t n, double lo, double hi, uint64_t stream) {
  Philox rng(1234, stream);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(lo + (hi - lo) * rng.uniform(static_cast<uint64_t>(i)));
  return v;
}

template <class F>
double median_ms(F f, int reps) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> ms(reps);
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a));
    f();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

void run(int64_t B, int64_t T, int64_t nH, int64_t P, int64_t G, int64_t N, int64_t Q, bool profile = false,
         bool once = false) {
  using bf = __nv_bfloat16;
  const int64_t BT = B * T;
  ops::SsdScanCudaArgs a;
  a.B = B, a.T = T, a.nH = nH, a.P = P, a.G = G, a.N = N, a.Q = Q, a.bf16 = true;
  a.x = upload<bf>(random(BT * nH * P, -1, 1, 1));
  a.Bm = upload<bf>(random(BT * G * N, -1, 1, 2));
  a.Cm = upload<bf>(random(BT * G * N, -1, 1, 3));
  a.D = upload<bf>(random(nH, 0.5, 1.5, 4));
  a.dt = upload<float>(random(BT * nH, 0.001, 0.1, 5));
  a.A = upload<float>(random(nH, -8, -1, 6));
  a.dy = upload<bf>(random(BT * nH * P, -1, 1, 7));
  a.y = upload<bf>(std::vector<float>(BT * nH * P, 0.f));
  a.dx = upload<bf>(std::vector<float>(BT * nH * P, 0.f));
  a.dBm = upload<bf>(std::vector<float>(BT * G * N, 0.f));
  a.dCm = upload<bf>(std::vector<float>(BT * G * N, 0.f));
  a.ddt = upload<float>(std::vector<float>(BT * nH, 0.f));
  a.dA = upload<float>(std::vector<float>(nH, 0.f));
  a.dD = upload<float>(std::vector<float>(nH, 0.f));

  if (once) {
    CHECK(ops::ssd_scan_forward_cuda(a, nullptr));
    CHECK(ops::ssd_scan_backward_cuda(a, nullptr));
    CHECK(cudaDeviceSynchronize());
    return;
  }
  const double fwd_ms = median_ms([&] { CHECK(ops::ssd_scan_forward_cuda(a, nullptr)); }, 20);
  const double bwd_ms = median_ms([&] { CHECK(ops::ssd_scan_backward_cuda(a, nullptr)); }, 20);
  CHECK(cudaDeviceSynchronize());

  // Matmul FLOPs of the chunked algorithm (full Q x Q products, as usually counted), per chunk:
  // per group CB^T 2 Q^2 N; per head Y_diag 2 Q^2 P, chunk state 2 Q P N, Y_off 2 Q P N.
  const double chunks = static_cast<double>(B) * ((T + Q - 1) / Q);
  const double fwd_flops =
      chunks * (G * 2.0 * Q * Q * N + nH * (2.0 * Q * Q * P + 4.0 * Q * P * N));
  const double bwd_flops = 2.0 * fwd_flops;
  const double act = static_cast<double>(BT) * nH * P * 2, bc = static_cast<double>(BT) * G * N * 2,
               dtb = static_cast<double>(BT) * nH * 4;
  const double fwd_bytes = 2 * act + 2 * bc + dtb;          // x, B, C, dt in; y out
  const double bwd_bytes = 3 * act + 4 * bc + 2 * dtb + act;  // x, dy, B, C, dt in; dx, dB, dC, ddt out
  std::printf("B=%lld T=%lld nH=%lld P=%lld G=%lld N=%lld Q=%lld bf16\n", (long long)B, (long long)T,
              (long long)nH, (long long)P, (long long)G, (long long)N, (long long)Q);
  std::printf("  FLOPs: fwd = B*ceil(T/Q)*(G*2Q^2N + nH*(2Q^2P + 4QPN)) = %.2f GFLOP; bwd counted as 2x fwd\n",
              fwd_flops * 1e-9);
  auto line = [&](const char* what, double ms, double flops, double bytes) {
    const double tf = flops / (ms * 1e-3) * 1e-12, tb = bytes / (ms * 1e-3) * 1e-12;
    std::printf("  %-8s %8.3f ms  %7.1f TFLOP/s (%4.1f%% of %.0f; public best ~200 for the fwd scan)  "
                "%6.3f TB/s of in/out bytes (%4.1f%% of %.1f)\n",
                what, ms, tf, 100 * tf / kPeakTflops, kPeakTflops, tb, 100 * tb / kPeakTBs, kPeakTBs);
  };
  line("forward", fwd_ms, fwd_flops, fwd_bytes);
  line("backward", bwd_ms, bwd_flops, bwd_bytes);
  line("fwd+bwd", fwd_ms + bwd_ms, fwd_flops + bwd_flops, fwd_bytes + bwd_bytes);
  if (g_step_ms > 0 && g_layers > 0)
    std::printf("  share of a %.1f ms step with %d Mamba layers: %.1f ms = %.1f%%\n", g_step_ms, g_layers,
                g_layers * (fwd_ms + bwd_ms), 100.0 * g_layers * (fwd_ms + bwd_ms) / g_step_ms);
  if (profile) {  // one more call of each with the per-phase timer on
    a.profile = true;
    std::printf("  forward phases:\n");
    CHECK(ops::ssd_scan_forward_cuda(a, nullptr));
    std::printf("  backward phases:\n");
    CHECK(ops::ssd_scan_backward_cuda(a, nullptr));
    a.profile = false;
  }
  for (const void* p : {a.x, a.Bm, a.Cm, a.D, static_cast<const void*>(a.dt), static_cast<const void*>(a.A), a.dy,
                        static_cast<const void*>(a.y), static_cast<const void*>(a.dx), static_cast<const void*>(a.dBm),
                        static_cast<const void*>(a.dCm), static_cast<const void*>(a.ddt),
                        static_cast<const void*>(a.dA), static_cast<const void*>(a.dD)})
    CHECK(cudaFree(const_cast<void*>(p)));
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed scratch in the pool, as the CUDA backend does for training steps.
  cudaMemPool_t pool;
  CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
  uint64_t keep = UINT64_MAX;
  CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--step-ms" || a == "--layers") && i + 1 < argc) {
      if (a == "--step-ms") g_step_ms = std::atof(argv[++i]);
      else g_layers = std::atoi(argv[++i]);
      continue;
    }
    args.push_back(a);
  }
  if (args.size() != 7) g_step_ms = 0;  // a share only for one named shape
  const bool once = args.size() == 8 && args[0] == "once";
  if (args.size() == 7 || once) {
    int64_t v[7];
    for (int i = 0; i < 7; ++i) v[i] = std::atoll(args[i + (once ? 1 : 0)].c_str());
    run(v[0], v[1], v[2], v[3], v[4], v[5], v[6], true, once);
    return 0;
  }
  run(4, 4096, 24, 64, 2, 128, 128, true);  // dense 132M hybrid training shape
  run(2, 4096, 32, 64, 8, 128, 128, true);  // MoE 1B hybrid training shape
  run(2, 4096, 64, 64, 8, 128, 128);
  run(2, 4096, 64, 64, 8, 128, 64);
  run(2, 4096, 64, 64, 8, 128, 256);
  return 0;
}
