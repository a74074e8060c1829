// MoE layer on CUDA, shaped like the MoE layers of bench/configs/hybrid_moe_1b.yaml (a benchmark,
// not a test): hidden 1024, 64 experts of width 768, top-6, n_group 1, shared expert 1536, 8192
// tokens, bf16. Times the router, the permutation, the grouped expert GEMMs per product (y, dx,
// dW) through each implementation against one dense cuBLASLt GEMM of the same shape, the
// combine, the aux loss, and the whole layer forward + backward (when the build has CUDA
// matmul/relu2 kernels). CUDA events, median of repeats, random data. Ceilings: 3.0 TB/s copy and
// 800 TFLOP/s bf16 GEMM (measured on the H100).
// usage: cuda_moe [tokens] [gemm]   ("gemm": only our grouped kernel's expert GEMMs)
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "gemm_peak.h"
#include "backend/cuda/cuda_check.h"
#include "core/rng.h"
#include "model/moe_mixer.h"
#include "ops/activations.h"
#include "ops/cuda_support.h"
#include "ops/grouped_matmul.h"
#include "ops/grouped_matmul_cuda.h"
#include "ops/moe_aux_loss.h"
#include "ops/moe_dispatch.h"
#include "ops/moe_router.h"

using namespace nemotron;

namespace {

constexpr double kCopyTBs = 3.0, kGemmTFlops = 800.0;

Tensor random_tensor(Context& ctx, Shape shape, DType dtype, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor host = Tensor::empty(std::move(shape), DType::f64);
  fill_uniform(host, Philox(seed), lo, hi);
  return host.to_host(dtype).to(*ctx.backend);
}

void report_bytes(const char* what, double ms, double bytes) {
  const double tbs = bytes / (ms * 1e-3) / 1e12;
  std::printf("  %-34s %9.3f ms  %7.2f TB/s  (%5.1f%% of %.1f TB/s)\n", what, ms, tbs, 100 * tbs / kCopyTBs, kCopyTBs);
}

void report_flops(const char* what, double ms, double flops) {
  const double tf = flops / (ms * 1e-3) / 1e12;
  std::printf("  %-34s %9.3f ms  %7.1f TFLOP/s (%5.1f%% of %.0f)\n", what, ms, tf, 100 * tf / kGemmTFlops, kGemmTFlops);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t N = argc > 1 ? std::atoll(argv[1]) : 8192;
  const bool gemm_only = argc > 2 && std::string(argv[2]) == "gemm";
  const int64_t H = 1024, E = 64, K = 6, F = 768, F_sh = 1536, S = N * K;
  const DType dt = DType::bf16, st = DType::f32;
  try {
    if (cuda::device_count() == 0) {
      std::printf("cuda_moe: no CUDA device\n");
      return 0;
    }
    cuda::CudaBackend backend(0);
    Context ctx{&backend, nullptr, dt};
    std::printf("MoE layer: tokens %lld, hidden %lld, %lld experts x width %lld, top-%lld, shared %lld, bf16 (%s)\n",
                static_cast<long long>(N), static_cast<long long>(H), static_cast<long long>(E),
                static_cast<long long>(F), static_cast<long long>(K), static_cast<long long>(F_sh),
                backend.name().c_str());

    ops::MoeRouterParams rp;
    rp.num_experts = E, rp.top_k = K, rp.n_group = 1, rp.topk_group = 1, rp.norm_topk_prob = true;
    rp.routed_scaling_factor = 2.5;
    Tensor logits = random_tensor(ctx, {N, E}, dt, 1, -3, 3);
    Tensor bias = random_tensor(ctx, {E}, st, 2, -0.1, 0.1);
    Tensor scores = ctx.empty({N, E}, st), idx = ctx.empty({N, K}, DType::i32), w = ctx.empty({N, K}, st);
    Tensor dw = random_tensor(ctx, {N, K}, st, 3), dlogits = ctx.empty({N, E}, dt);

    std::printf("router\n");
    double t = median_cuda_ms(ctx, 21, [&] { ops::moe_router_scores(ctx, logits, scores); });
    report_bytes("scores (sigmoid)", t, N * E * (2.0 + 4.0));
    t = median_cuda_ms(ctx, 21, [&] { ops::moe_select_experts(ctx, rp, scores, bias, idx); });
    report_bytes("select (top-k)", t, N * E * 4.0 + N * K * 4.0);
    t = median_cuda_ms(ctx, 21, [&] { ops::moe_topk_weights(ctx, rp, scores, idx, w); });
    report_bytes("topk weights", t, N * K * 12.0);
    t = median_cuda_ms(ctx, 21, [&] { ops::moe_router_backward(ctx, rp, scores, idx, dw, dlogits); });
    report_bytes("router backward", t, N * E * (4.0 + 2.0));
    Tensor counts = ctx.empty({1, E}, st), psum = ctx.empty({1, E}, st);
    t = median_cuda_ms(ctx, 21, [&] { ops::moe_seq_aux_forward(ctx, K, scores, 1, counts, psum); });
    report_bytes("seq aux forward", t, N * E * 4.0);
    t = median_cuda_ms(ctx, 21, [&] { ops::moe_seq_aux_backward(ctx, K, scores, counts, 1e-4, dlogits); });
    report_bytes("seq aux backward", t, N * E * (4.0 + 4.0));

    std::printf("permutation\n");
    ops::MoeDispatch m;
    t = median_cuda_ms(ctx, 21, [&] { m = ops::moe_make_dispatch(ctx, idx, E); });
    std::printf("  %-34s %9.3f ms  (counts, slots, one copy of the counts to the host)\n", "make dispatch", t);
    int64_t lo = S, hi = 0;
    for (int64_t c : m.tokens_per_expert) lo = std::min(lo, c), hi = std::max(hi, c);
    std::printf("  rows per expert: min %lld, max %lld, mean %lld\n", static_cast<long long>(lo),
                static_cast<long long>(hi), static_cast<long long>(S / E));
    Tensor x = random_tensor(ctx, {N, H}, dt, 4), xs = ctx.empty({S, H}, dt);
    Tensor ys = random_tensor(ctx, {S, H}, dt, 5), y = ctx.empty({N, H}, dt), dy = random_tensor(ctx, {N, H}, dt, 6);
    Tensor dys = ctx.empty({S, H}, dt), dwk = ctx.empty({N, K}, st), dx = ctx.empty({N, H}, dt);
    t = median_cuda_ms(ctx, 21, [&] { ops::moe_dispatch_forward(ctx, m, x, xs); });
    report_bytes("dispatch forward (gather)", t, (N + S) * H * 2.0);
    t = median_cuda_ms(ctx, 21, [&] { ops::moe_combine_forward(ctx, m, ys, w, y); });
    report_bytes("combine forward", t, (N + S) * H * 2.0);
    t = median_cuda_ms(ctx, 21, [&] { ops::moe_combine_backward(ctx, m, ys, w, dy, dys, dwk); });
    report_bytes("combine backward", t, (N + 2 * S) * H * 2.0);
    t = median_cuda_ms(ctx, 21, [&] { ops::moe_dispatch_backward(ctx, m, dys, dx); });
    report_bytes("dispatch backward", t, (N + S) * H * 2.0);

    std::printf("expert GEMMs (S = %lld slot rows)\n", static_cast<long long>(S));
    std::vector<Tensor> wu, wd, gu, gd;
    for (int64_t e = 0; e < E; ++e) {
      wu.push_back(random_tensor(ctx, {F, H}, dt, 100 + e, -0.05, 0.05));
      wd.push_back(random_tensor(ctx, {H, F}, dt, 200 + e, -0.05, 0.05));
      gu.push_back(ctx.zeros({F, H}, st));
      gd.push_back(ctx.zeros({H, F}, st));
    }
    Tensor up = ctx.empty({S, F}, dt), act = random_tensor(ctx, {S, F}, dt, 7), dact = ctx.empty({S, F}, dt);
    Tensor dxs = ctx.empty({S, H}, dt);
    const double gemm = 2.0 * S * H * F;
    Tensor none;
    // Per product: y (forward), dW alone (dx undefined), dx = (dx + dW) - dW.
    auto time_products = [&](const std::string& label) {
      double fu = median_cuda_ms(ctx, 21, [&] { ops::grouped_linear_forward(ctx, xs, m.expert_offset, wu, up); });
      double fd = median_cuda_ms(ctx, 21, [&] { ops::grouped_linear_forward(ctx, act, m.expert_offset, wd, ys); });
      const std::string fwd_path = ops::grouped_gemm_last_path(false);
      double wu_ms = median_cuda_ms(ctx, 21, [&] { ops::grouped_linear_backward(ctx, xs, m.expert_offset, wu, dact, none, gu); });
      double wd_ms = median_cuda_ms(ctx, 21, [&] { ops::grouped_linear_backward(ctx, act, m.expert_offset, wd, dys, none, gd); });
      double bu = median_cuda_ms(ctx, 21, [&] { ops::grouped_linear_backward(ctx, xs, m.expert_offset, wu, dact, dxs, gu); });
      double bd = median_cuda_ms(ctx, 21, [&] { ops::grouped_linear_backward(ctx, act, m.expert_offset, wd, dys, dact, gd); });
      const std::string dw_path = ops::grouped_gemm_last_path(true);
      std::printf(" %s (y/dx: %s, dW: %s)\n", label.c_str(), fwd_path.c_str(), dw_path.c_str());
      report_flops("up forward   y = x Wu^T", fu, gemm);
      report_flops("down forward y = a Wd^T", fd, gemm);
      report_flops("up dx (derived)", bu - wu_ms, gemm);
      report_flops("down dx (derived)", bd - wd_ms, gemm);
      report_flops("up dW", wu_ms, gemm);
      report_flops("down dW", wd_ms, gemm);
      report_flops("all six products", fu + fd + bu + bd, 6 * gemm);
    };
    using I = ops::GroupedGemmImpl;
    struct Variant {
      const char* label;
      I y_dx, dw;
    };
    std::vector<Variant> variants{{"ours (wgmma)", I::automatic, I::automatic}};
    if (!gemm_only)
      variants = {{"ours (wgmma)", I::automatic, I::automatic},
                  {"cuBLAS grouped (dW per expert)", I::cublas_grouped, I::cublas_grouped}};
    for (const Variant& v : variants) {
      ops::set_grouped_gemm_impl(v.y_dx, v.dw);
      time_products(v.label);
    }
    ops::set_grouped_gemm_impl(I::automatic);
    {  // our kernel against cuBLAS at these shapes (relative Frobenius difference), and bit-for-bit
       // repeatability of ours (y, dx, and dW accumulated from zero, twice each)
      auto rel = [](const std::vector<double>& a, const std::vector<double>& b) {
        double d = 0, n = 0;
        for (size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]), n += b[i] * b[i];
        return std::sqrt(d / n);
      };
      std::vector<double> y[3], dxv[3], dwv[3];
      for (int k = 0; k < 3; ++k) {  // ours, ours again, cuBLAS
        ops::set_grouped_gemm_impl(k < 2 ? I::automatic : I::cublas_grouped);
        ops::grouped_linear_forward(ctx, xs, m.expert_offset, wu, up);
        y[k] = up.to_f64_vector();
        NM_CUDA_CHECK(cudaMemset(gu[3].raw(), 0, gu[3].nbytes()));
        NM_CUDA_CHECK(cudaMemset(gu[40].raw(), 0, gu[40].nbytes()));
        ops::grouped_linear_backward(ctx, xs, m.expert_offset, wu, dact, dxs, gu);
        dxv[k] = dxs.to_f64_vector();
        dwv[k] = gu[3].to_f64_vector();
        std::vector<double> g40 = gu[40].to_f64_vector();
        dwv[k].insert(dwv[k].end(), g40.begin(), g40.end());
      }
      ops::set_grouped_gemm_impl(I::automatic);
      std::printf("  ours vs cuBLAS (relative): y %.2e, dx %.2e, dW (experts 3, 40) %.2e\n", rel(y[0], y[2]),
                  rel(dxv[0], dxv[2]), rel(dwv[0], dwv[2]));
      std::printf("  ours repeated bit-identical: y %s, dx %s, dW %s\n", y[0] == y[1] ? "yes" : "NO",
                  dxv[0] == dxv[1] ? "yes" : "NO", dwv[0] == dwv[1] ? "yes" : "NO");
    }
    if (gemm_only) return 0;
    {  // ceiling: one dense cuBLASLt GEMM (ops::matmul) of the same FLOPs per product
      Tensor wf = random_tensor(ctx, {F, H}, dt, 300, -0.05, 0.05), gf = ctx.zeros({F, H}, st);
      std::printf(" one dense cuBLASLt GEMM of the same shape (S = %lld rows)\n", static_cast<long long>(S));
      t = median_cuda_ms(ctx, 21, [&] { ops::matmul(ctx, xs, false, wf, true, up); });
      report_flops("y = x W^T [S,H]x[F,H]^T", t, gemm);
      t = median_cuda_ms(ctx, 21, [&] { ops::matmul(ctx, up, false, wf, false, dxs); });
      report_flops("dx = dy W [S,F]x[F,H]", t, gemm);
      t = median_cuda_ms(ctx, 21, [&] { ops::matmul(ctx, up, true, xs, false, gf, 1.0, 1.0); });
      report_flops("dW += dy^T x (float32)", t, gemm);
    }
    ops::set_grouped_gemm_impl(ops::GroupedGemmImpl::automatic);

    std::printf("whole layer (MoeMixer forward + backward)\n");
    if (!ops::cuda_supports("matmul") || !ops::cuda_supports("relu2")) {
      std::printf("  skipped: this build has no CUDA matmul/relu2 kernels (they come from the gemm branch)\n");
      return 0;
    }
    model::ModelConfig cfg;
    cfg.hidden_size = H;
    cfg.hybrid_override_pattern = "E";
    cfg.n_routed_experts = E;
    cfg.num_experts_per_tok = K;
    cfg.n_group = 1;
    cfg.topk_group = 1;
    cfg.moe_intermediate_size = F;
    cfg.moe_shared_expert_intermediate_size = F_sh;
    cfg.n_shared_experts = 1;
    cfg.norm_topk_prob = true;
    cfg.routed_scaling_factor = 2.5;
    cfg.initializer_range = 0.02;
    model::ParamStore store(backend, dt);
    model::MoeMixer moe(cfg, store, "backbone.layers.0.mixer.", 0);
    moe.init(1234);
    const int64_t B = 2;
    Tensor u = random_tensor(ctx, {B, N / B, H}, dt, 8);
    Tensor dout = random_tensor(ctx, {B, N / B, H}, dt, 9);
    {  // the layer through our kernel against the layer through cuBLAS (same inputs, same routing)
      std::vector<double> outs[2];
      for (int k = 0; k < 2; ++k) {
        ops::set_grouped_gemm_impl(k == 0 ? ops::GroupedGemmImpl::ours : ops::GroupedGemmImpl::cublas_grouped);
        outs[k] = moe.forward(ctx, u, nullptr).to_f64_vector();
      }
      ops::set_grouped_gemm_impl(ops::GroupedGemmImpl::automatic);
      double d = 0, n = 0;
      for (size_t i = 0; i < outs[0].size(); ++i) d += (outs[0][i] - outs[1][i]) * (outs[0][i] - outs[1][i]), n += outs[1][i] * outs[1][i];
      std::printf("  layer output, our kernel vs cuBLAS: relative difference %.2e\n", std::sqrt(d / n));
    }
    struct LayerRun {
      bool aux;
      const char* label;
      ops::GroupedGemmImpl y_dx, dw;
    };
    using I = ops::GroupedGemmImpl;
    for (const LayerRun& run : {LayerRun{false, "cuBLAS grouped (dW per expert)", I::cublas_grouped, I::cublas_grouped},
                                LayerRun{false, "ours (wgmma)", I::automatic, I::automatic},
                                LayerRun{true, "ours (wgmma)", I::automatic, I::automatic}}) {
      const bool aux = run.aux;
      ops::set_grouped_gemm_impl(run.y_dx, run.dw);
      moe.set_seq_aux_loss(aux ? 1e-4 : 0.0, 1.0);
      std::unique_ptr<model::MixerSaved> saved;
      double tf = median_cuda_ms(ctx, 21, [&] { moe.forward(ctx, u, &saved); });
      double tb = median_cuda_ms(ctx, 21, [&] { moe.backward(ctx, *saved, dout); });
      double tfb = median_cuda_ms(ctx, 21, [&] {
        std::unique_ptr<model::MixerSaved> s;
        Tensor o = moe.forward(ctx, u, &s);
        moe.backward(ctx, *s, dout);
      });
      const double fwd_flops = moe.forward_flops_per_token(N / B) * N;
      std::printf(" seq_aux_loss %s, expert GEMMs %s\n", aux ? "on" : "off", run.label);
      report_flops("layer forward", tf, fwd_flops);
      report_flops("layer backward", tb, 2 * fwd_flops);
      report_flops("layer forward + backward", tfb, 3 * fwd_flops);
    }
    std::printf("  (layer FLOPs: router + 6 routed experts + shared expert per token; forward x3 for fwd+bwd)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_moe: %s\n", e.what());
    return 1;
  }
  return 0;
}
