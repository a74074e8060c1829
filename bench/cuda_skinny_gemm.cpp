// The decode-size linear y = x W^T (bfloat16, 1..16 rows of x) on the GPU: the skinny GEMM
// (ops/skinny_gemm_cuda.h) against cuBLASLt (the same ops::linear_forward with the skinny path
// off), on the weight shapes of the bench configs' decode steps (Llama-3.1-8B's shape and its
// tensor parallel 2 halves, the dense 125M and MoE 1B hybrids). The skinny GEMM runs twice: as
// chosen (K split over a cluster of blocks where the tiles are few) and unsplit (k_splits 1). A benchmark, not a test. Each timed call reads another copy of W
// (copies rotated over >= 256 MiB, past the 50 MB L2), calls back to back between two events.
// Prints microseconds, the fraction of a device-to-device copy's bandwidth measured in the same
// run (bytes: W + x + y once), the faster path, and whether matmul_cuda's rule (skinny_gemm_wins)
// takes it; appends one JSON line per (shape, rows) to --results.
// usage: cuda_skinny_gemm [--rows 1,2,4,8,12,16] [--reps 15] [--results bench/results/skinny_gemm.jsonl]
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include "bench_io.h"
#include "core/version.h"
#include "gemm_peak.h"
#include "ops/matmul_cuda.h"
#include "ops/skinny_gemm_cuda.h"

using namespace nemotron;

namespace {

struct Shape2 {
  const char* name;
  int64_t N, K;
};

constexpr Shape2 kShapes[] = {
    {"8B q_proj / o_proj", 4096, 4096},      {"8B k_proj / v_proj", 1024, 4096},
    {"8B gate / up", 14336, 4096},            {"8B down", 4096, 14336},
    {"8B lm_head", 128256, 4096},             {"8B TP2 q_proj", 2048, 4096},
    {"8B TP2 k_proj / v_proj", 512, 4096},    {"8B TP2 o_proj", 4096, 2048},
    {"8B TP2 gate / up", 7168, 4096},         {"8B TP2 down", 4096, 7168},             {"dense125m q/o", 768, 768},
    {"dense125m k/v", 256, 768},              {"dense125m mamba in_proj", 3608, 768},
    {"dense125m mamba out_proj", 768, 1536},  {"dense125m mlp up", 3072, 768},
    {"dense125m mlp down", 768, 3072},        {"dense125m lm_head", 32768, 768},
    {"moe1b mamba in_proj", 6176, 1024},      {"moe1b shared up", 1536, 1024},
    {"moe1b shared down", 1024, 1536},        {"moe1b lm_head", 131072, 1024},
    {"tiny 256 x 256", 256, 256},
};

double rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_f64_vector(), y = b.to_f64_vector();
  double d = 0, n = 0;
  for (size_t i = 0; i < x.size(); ++i) d += (x[i] - y[i]) * (x[i] - y[i]), n += y[i] * y[i];
  return std::sqrt(d / std::max(n, 1e-300));
}

}  // namespace

int main(int argc, char** argv) {
  std::string rows_s = "1,2,4,8,12,16", results = "bench/results/skinny_gemm.jsonl";
  int reps = 15;
  CLI::App app{"skinny GEMM against cuBLASLt for decode-size bfloat16 linears"};
  app.add_option("--rows", rows_s, "rows of x (comma-separated, each 1..16)");
  app.add_option("--reps", reps, "timed repeats (median)");
  app.add_option("--results", results, "append one JSON line per shape and row count (empty: none)");
  CLI11_PARSE(app, argc, argv);
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "no CUDA device visible\n");
    return 2;
  }
  try {
    cuda::CudaBackend gpu(0);
    Context ctx{&gpu, nullptr, DType::bf16};
    const double copy_tbs = measure_copy_tbs(ctx);
    std::printf("device: %s | nemotron %s | commit %s\n", gpu.name().c_str(), NEMOTRON_VERSION,
                bench::commit_or_unknown().c_str());
    std::printf("device-to-device copy (1 GiB, read + write): %.3f TB/s, the ceiling below\n", copy_tbs);
    std::printf("%-26s %6s %6s %3s %6s %10s %7s %10s %10s %7s %8s %6s %9s\n", "shape", "N", "K", "M", "splits",
                "skinny us", "%copy", "unsplit us", "cuBLASLt us", "%copy", "faster", "rule", "rel diff");
    const std::vector<int64_t> rows = bench::parse_sizes(rows_s);
    int agree = 0, total = 0;
    double best_loss = 0;  // the worst slowdown the rule accepts (rule's time / faster time - 1)
    for (const Shape2& s : kShapes) {
      const int64_t w_bytes = s.N * s.K * 2;
      const int64_t copies = std::max<int64_t>(2, ((int64_t{256} << 20) + w_bytes - 1) / w_bytes);
      const Tensor ws = random_device_tensor(ctx, {copies * s.N, s.K}, DType::bf16, 7, -0.05, 0.05);
      const Tensor x = random_device_tensor(ctx, {16, s.K}, DType::bf16, 8);
      for (int64_t M : rows) {
        Tensor xm = x.slice(0, M);
        Tensor y = ctx.empty({M, s.N}, DType::bf16), y_ref = ctx.empty({M, s.N}, DType::bf16);
        auto run_skinny = [&](int k_splits) {
          ops::SkinnyGemmCudaArgs a;
          a.k_splits = k_splits;
          a.x = xm.raw(), a.y = y.raw(), a.M = M, a.N = s.N, a.K = s.K, a.lda = a.ldw = s.K;
          for (int64_t r = 0; r < copies; ++r) {
            a.w = static_cast<const char*>(ws.raw()) + r * w_bytes;
            NM_CUDA_CHECK(ops::skinny_gemm_cuda(a, cuda::cuda_stream(ctx)));
          }
        };
        auto run_lt = [&] {
          for (int64_t r = 0; r < copies; ++r) ops::linear_forward(ctx, xm, ws.slice(r * s.N, (r + 1) * s.N), y_ref);
        };
        ops::MatmulCudaArgs probe;
        probe.a = xm.raw(), probe.b = ws.raw(), probe.ab = probe.c_dtype = ops::GemmDType::bf16;
        probe.trans_b = true, probe.M = M, probe.N = s.N, probe.K = s.K, probe.lda = probe.ldb = s.K;
        ops::set_skinny_gemm_enabled(true);
        const bool rule = ops::uses_skinny_gemm(probe);
        // Both timed whatever the rule says: the kernel called directly, cuBLASLt with the path off.
        ops::SkinnyGemmCudaArgs shape_args;
        shape_args.M = M, shape_args.N = s.N, shape_args.K = s.K;
        int sms = 0;
        NM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
        const int splits = ops::skinny_gemm_k_splits(shape_args, sms);
        const double unsplit_ms = median_cuda_ms(ctx, reps, [&] { run_skinny(1); }) / static_cast<double>(copies);
        const double sk_ms = median_cuda_ms(ctx, reps, [&] { run_skinny(0); }) / static_cast<double>(copies);
        ops::set_skinny_gemm_enabled(false);
        const double lt_ms = median_cuda_ms(ctx, reps, run_lt) / static_cast<double>(copies);
        ops::set_skinny_gemm_enabled(true);
        const double diff = rel_diff(y, y_ref);
        const double bytes = static_cast<double>(w_bytes + M * s.K * 2 + M * s.N * 2);
        const double sk_frac = bytes / (sk_ms * 1e-3) / 1e12 / copy_tbs, lt_frac = bytes / (lt_ms * 1e-3) / 1e12 / copy_tbs;
        const bool skinny_faster = sk_ms < lt_ms;
        const double chosen = rule ? sk_ms : lt_ms, best = std::min(sk_ms, lt_ms);
        const bool ok = chosen <= 1.03 * best;  // within timing noise of the faster
        agree += ok, ++total;
        best_loss = std::max(best_loss, chosen / best - 1.0);
        std::printf("%-26s %6lld %6lld %3lld %6d %10.2f %6.1f%% %10.2f %10.2f %6.1f%% %8s %6s %9.2e%s\n", s.name,
                    static_cast<long long>(s.N), static_cast<long long>(s.K), static_cast<long long>(M), splits,
                    sk_ms * 1e3, 100 * sk_frac, unsplit_ms * 1e3, lt_ms * 1e3, 100 * lt_frac, skinny_faster ? "skinny" : "cuBLASLt",
                    rule ? "skinny" : "cuBLAS", diff, ok ? "" : "  <- rule misses");
        nlohmann::json rec = {{"bench", "skinny_gemm"}, {"shape", s.name}, {"M", M}, {"N", s.N}, {"K", s.K},
                              {"skinny_us", sk_ms * 1e3}, {"skinny_unsplit_us", unsplit_ms * 1e3},
                              {"k_splits", splits}, {"cublaslt_us", lt_ms * 1e3},
                              {"skinny_copy_fraction", sk_frac}, {"cublaslt_copy_fraction", lt_frac},
                              {"copy_tbs", copy_tbs}, {"rule_takes_skinny", rule}, {"rel_diff", diff},
                              {"device", gpu.name()}, {"version", NEMOTRON_VERSION},
                              {"commit", bench::commit_or_unknown()}};
        bench::append_result(results, rec);
      }
    }
    std::printf("rule (skinny_gemm_wins) took the faster path, within 3%%, on %d of %d shapes; worst cost %.1f%%\n",
                agree, total, 100 * best_loss);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
