// Paged decode attention (ops/attention_decode.h) alone, at Llama-3.1-8B's attention shape (32
// query heads on 8 KV heads of 128, bfloat16, blocks of 16), against the memory ceiling: for each
// batch, one decode token per sequence over contexts drawn uniformly from [--ctx-min, --ctx-max]
// (the 1000 x 256/256 rollout's decode steps see 256..512), through `layers` separate caches in
// turn, as a decode step walks its 32 layers (so the caches are not served from L2). Reports us
// per layer call and the KV bytes it must read over that time against a device-to-device copy.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "bench_io.h"
#include "core/rng.h"
#include "core/version.h"
#include "gemm_peak.h"
#include "ops/attention_decode.h"

using namespace nemotron;

int main(int argc, char** argv) {
  std::string batches_s = "1,8,32,64,128,256", results;
  int64_t ctx_min = 256, ctx_max = 512, layers = 32, nq = 32, nkv = 8, hd = 128, bs = 16;
  int reps = 20;
  CLI::App app{"paged decode attention at the 8B shape against the copy bandwidth"};
  app.add_option("--batch", batches_s, "decode batch sizes (comma-separated)");
  app.add_option("--ctx-min", ctx_min, "shortest context (tokens, the new one included)")->check(CLI::PositiveNumber);
  app.add_option("--ctx-max", ctx_max, "longest context")->check(CLI::PositiveNumber);
  app.add_option("--layers", layers, "separate caches walked in turn per timed run")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed repeats (median)")->check(CLI::PositiveNumber);
  app.add_option("--results", results, "append one JSON line per batch size (empty: none)");
  CLI11_PARSE(app, argc, argv);
  if (ctx_max < ctx_min) {
    std::fprintf(stderr, "error: --ctx-max %lld is below --ctx-min %lld\n", static_cast<long long>(ctx_max),
                 static_cast<long long>(ctx_min));
    return 2;
  }
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
    std::printf("device-to-device copy (1 GiB, read + write): %.3f TB/s | contexts U[%lld, %lld], %lld caches\n", copy_tbs,
                static_cast<long long>(ctx_min), static_cast<long long>(ctx_max), static_cast<long long>(layers));
    std::printf("%6s %10s %10s %8s %7s\n", "batch", "us/layer", "KV MB", "TB/s", "%copy");
    for (int64_t B : bench::parse_sizes(batches_s)) {
      const Philox rng(11);
      std::vector<int32_t> lens(static_cast<size_t>(B));
      for (int64_t i = 0; i < B; ++i)
        lens[i] = static_cast<int32_t>(ctx_min + static_cast<int64_t>(rng.bits(static_cast<uint64_t>(i)) % (ctx_max - ctx_min + 1)));
      const int64_t M = (ctx_max + bs - 1) / bs, blocks = B * M;
      // Block b of sequence i is pool block i + b B: neighbours in a sequence lie apart, as the
      // engine's allocator leaves them after refills.
      std::vector<int32_t> table(static_cast<size_t>(B * M)), cu(static_cast<size_t>(B + 1));
      for (int64_t i = 0; i < B; ++i)
        for (int64_t b = 0; b < M; ++b) table[i * M + b] = static_cast<int32_t>(i + b * B);
      std::iota(cu.begin(), cu.end(), 0);
      const Tensor t_table = Tensor::from_vector<int32_t>({B, M}, table).to(gpu);
      const Tensor t_cu = Tensor::from_vector<int32_t>({B + 1}, cu).to(gpu);
      const Tensor t_lens = Tensor::from_vector<int32_t>({B}, lens).to(gpu);
      std::vector<Tensor> kc, vc;
      for (int64_t l = 0; l < layers; ++l) {
        kc.push_back(random_device_tensor(ctx, {blocks, bs, nkv, hd}, DType::bf16, 100 + 2 * l));
        vc.push_back(random_device_tensor(ctx, {blocks, bs, nkv, hd}, DType::bf16, 101 + 2 * l));
      }
      const Tensor q = random_device_tensor(ctx, {B, nq, hd}, DType::bf16, 7);
      Tensor o = ctx.empty({B, nq, hd}, DType::bf16);
      const double ms = median_cuda_ms(ctx, reps, [&] {
        for (int64_t l = 0; l < layers; ++l) ops::attention_decode_forward(ctx, q, kc[l], vc[l], {t_table, t_cu, t_lens}, o);
      });
      const double us = ms * 1e3 / static_cast<double>(layers);
      double keys = 0;
      for (int32_t L : lens) keys += L;
      const double bytes = keys * static_cast<double>(nkv * hd * 2 * 2);
      const double tbs = bytes / (us * 1e-6) / 1e12;
      std::printf("%6lld %10.2f %10.2f %8.3f %6.1f%%\n", static_cast<long long>(B), us, bytes / 1e6, tbs,
                  100.0 * tbs / copy_tbs);
      bench::append_result(results, {{"bench", "cuda_attention_decode"}, {"device", gpu.name()},
                                     {"commit", bench::commit_or_unknown()}, {"batch", B}, {"ctx_min", ctx_min},
                                     {"ctx_max", ctx_max}, {"nq", nq}, {"nkv", nkv}, {"hd", hd}, {"us_per_layer", us},
                                     {"kv_bytes", bytes}, {"tbs", tbs}, {"copy_tbs", copy_tbs}});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
