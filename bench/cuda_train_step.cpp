// One H100 train step (forward + backward of --grad-accum micro-batches, grad norm, AdamW) in bf16
// with float32 masters: a benchmark, not a test. Prints tokens/s, achieved TFLOP/s and MFU against a bf16 GEMM peak it
// measures itself in the same run, where one step's time goes by op phase (GEMM, attention, SSD
// scan, MoE routing, elementwise, loss, optimizer: CUDA events around every op of one extra step,
// core/op_profiler.h; also the costliest ops by name) and by layer kind (each layer timed alone), and, with --reference, the same
// config trained by transformers' NemotronHForCausalLM on the same GPU (tools/bench_transformers.py;
// Nemotron-H configs only: a DeciLM config, bench/configs/decilm_1b.yaml, is refused with --reference).
// usage: cuda_train_step -c bench/configs/hybrid_dense_125m.yaml [--batch 4] [--seq-len 4096]
//                        [--grad-accum 1] [--steps 10] [--reference] [--results bench/results.jsonl]
//                        [--peak-tflops X (skip measuring)] [--packed MEAN_LEN] [--lora DIM]
//                        [--lora-dropout P] [--lora-targets T1,T2,...]
// --packed: SFT's packed rows (reference/data-formats.md §6.8) instead of one sequence per row:
// sequences of MEAN_LEN/2 .. 3*MEAN_LEN/2 tokens back to back (seq_idx, position_ids restarting,
// attention and the Mamba state reset at every boundary), the loss on the last 60% of each
// sequence (the assistant part), so SFT's tokens/s compares with pretraining's on one config.
// --lora DIM: LoRA adapters of rank DIM (alpha = DIM) on every projection the six Megatron
// targets cover (linear_qkv, linear_proj, linear_fc1, linear_fc2, in_proj, out_proj), the base
// frozen: the step time and peak memory of LoRA SFT against full SFT on the same config.
// --lora-dropout P: the adapters' input dropout (peft.dropout), to time its mask kernels.
// --lora-targets: the targets instead of all six (Megatron-Bridge's default peft.target_modules
// is linear_qkv,linear_proj,linear_fc1,linear_fc2: no adapters on Mamba's projections).
// Model FLOPs per token: 3 x the forward matmul + attention FLOPs of `model info` (the scan,
// norms and elementwise work are not counted, as in Megatron's MFU).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_io.h"
#include "bench_models.h"
#include "core/version.h"
#include "model/hybrid_model.h"
#include "model/lora.h"
#include "model/model_config.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_op_profiler.h"
#include "core/host_waits.h"
#include "core/op_profiler.h"
#include "core/rng.h"
#include "core/workspace.h"
#include "gemm_peak.h"
#include "train/adamw.h"
#include "train/train_step.h"

using namespace nemotron;

namespace {

const char* kind_name(model::LayerKind k) {
  switch (k) {
    case model::LayerKind::mamba: return "mamba layers";
    case model::LayerKind::attention: return "attention layers";
    case model::LayerKind::mlp: return "mlp layers";
    case model::LayerKind::moe: return "moe layers";
    case model::LayerKind::linear: return "linear layers (DeciLM replace_with_linear)";
  }
  return "layers";
}

int64_t count_kind(const model::ModelConfig& cfg, model::LayerKind k) {
  int64_t n = 0;
  for (int64_t i = 0; i < cfg.num_layers(); ++i) n += cfg.layer_kind(i) == k;
  return n;
}

// The same tokens as bench::random_train_batch, cut into packed sequences: labels end at each sequence's
// last token (-100), seq_idx counts sequences along the row, position_ids restart, loss_mask
// covers each sequence's last 60%.
model::Batch packed_batch(const model::ModelConfig& cfg, int64_t B, int64_t T, int64_t mean_len, uint64_t seed,
                          int64_t* sequences) {
  model::Batch b = bench::random_train_batch(cfg, B, T, seed);
  const std::vector<double> ids = b.input_ids.to_f64_vector();
  std::vector<int32_t> labels(ids.size()), seq(ids.size()), pos(ids.size());
  std::vector<float> mask(ids.size());
  Philox rng(seed + 1);
  uint64_t draw = 0;
  *sequences = 0;
  for (int64_t r = 0; r < B; ++r) {
    int64_t t = 0, k = 0;
    while (t < T) {
      const int64_t len = std::min<int64_t>(T - t, mean_len / 2 + static_cast<int64_t>(rng.bits(draw++) % static_cast<uint64_t>(mean_len + 1)));
      const int64_t prompt = len * 2 / 5;
      for (int64_t i = 0; i < len; ++i) {
        const size_t n = static_cast<size_t>(r * T + t + i);
        labels[n] = i + 1 < len ? static_cast<int32_t>(ids[n + 1]) : -100;
        seq[n] = static_cast<int32_t>(k);
        pos[n] = static_cast<int32_t>(i);
        mask[n] = i >= prompt ? 1.0f : 0.0f;
      }
      t += len, ++k;
    }
    *sequences += k;
  }
  b.labels = Tensor::from_vector<int32_t>({B, T}, labels);
  b.loss_mask = Tensor::from_vector<float>({B, T}, mask);
  b.seq_idx = Tensor::from_vector<int32_t>({B, T}, seq);
  b.position_ids = Tensor::from_vector<int32_t>({B, T}, pos);
  return b;
}

// Same config, transformers' model, same GPU: tools/bench_transformers.py prints one JSON line
// (null and the output kept in `failure` when it fails).
nlohmann::json run_transformers_reference(const model::ModelConfig& cfg, int64_t B, int64_t T, int accum,
                                          std::string& failure) {
  const std::string cfg_json = "/tmp/nemotron_bench_config.json";
  std::ofstream(cfg_json) << model::model_config_to_hf_json(cfg).dump(2);
  const std::string cmd = fmt::format(
      "python3 tools/bench_transformers.py --config {} --batch {} --seq-len {} --grad-accum {} --steps 3 2>&1", cfg_json,
      B, T, accum);
  std::FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  const int rc = p ? pclose(p) : -1;
  const auto last = out.rfind("{\"transformers\"");
  if (rc == 0 && last != std::string::npos) return nlohmann::json::parse(out.substr(last));
  failure = fmt::format("exit {}: {}", rc, out.size() > 2000 ? out.substr(out.size() - 2000) : out);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "bench/configs/hybrid_dense_125m.yaml", results;
  int64_t B = 4, T = 4096;
  int steps = 10, accum = 1;
  int64_t packed = 0, lora = 0;
  double lora_dropout = 0;
  std::vector<std::string> lora_targets = model::lora_target_names();
  bool reference = false;
  double peak = 0;
  CLI::App app{"CUDA train-step benchmark (bf16, fp32 masters)"};
  app.add_option("-c,--config", config, "model config (YAML with a model: section, or config.json)");
  app.add_option("--batch", B, "micro-batch size");
  app.add_option("--seq-len", T, "sequence length");
  app.add_option("--steps", steps, "timed steps (median; after warm-up)");
  app.add_option("--grad-accum", accum, "micro-batches per optimizer step (Megatron's global / micro batch)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--reference", reference, "also time transformers' NemotronHForCausalLM (python3) on the same GPU");
  app.add_option("--results", results, "append one JSON line with the figures to this file");
  app.add_option("--peak-tflops", peak, "GEMM peak to use instead of measuring it (repeat runs in one session)");
  app.add_option("--packed", packed, "SFT: packed rows of sequences of about this many tokens (0: one per row)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lora", lora, "LoRA rank on the six Megatron targets, base frozen (0: full training)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lora-targets", lora_targets, "with --lora: the Megatron targets (default: all six)")->delimiter(',');
  app.add_option("--lora-dropout", lora_dropout, "with --lora: dropout on the adapters' input (peft.dropout)")
      ->check(CLI::Range(0.0, 0.99));
  CLI11_PARSE(app, argc, argv);
  try {
    if (cuda::device_count() == 0) {
      std::fprintf(stderr, "no CUDA device visible\n");
      return 2;
    }
    model::ModelConfig cfg = model::load_model_config(config);
    // tools/bench_transformers.py builds NemotronHForCausalLM; DeciLM's transformers class is
    // remote code (DeciLMForCausalLM), which that script does not load.
    if (reference && cfg.is_decilm()) {
      std::fprintf(stderr, "error: --reference: %s is a DeciLM (nemotron-nas) config; tools/bench_transformers.py "
                           "builds only Nemotron-H (NemotronHForCausalLM). Run without --reference.\n",
                   config.c_str());
      return 2;
    }
    // The reference runs first, while this process holds no GPU memory: transformers' torch Mamba
    // path needs most of an 80 GB card at 4 x 4096 tokens.
    nlohmann::json ref;
    std::string ref_failure;
    if (reference) ref = run_transformers_reference(cfg, B, T, accum, ref_failure);

    cuda::CudaBackend gpu(0);
    // Activations from the caching allocator, as the trainer takes them on a GPU (no arena).
    Context ctx{&gpu, nullptr, DType::bf16};
    const bool peak_measured = peak <= 0;
    if (peak_measured) peak = measure_gemm_peak_tflops(ctx);

    model::HybridModel net(cfg, gpu, DType::bf16);
    net.init(1234);
    if (lora > 0) {
      model::LoraConfig lc;
      lc.target_modules = lora_targets;
      lc.dim = lora, lc.alpha = static_cast<double>(lora), lc.dropout = lora_dropout;
      model::attach_lora(net.params(), lc, 1234, "--lora");
    }
    net.params().create_masters();
    train::AdamW opt(net.params(), {});
    // The trainer's step (train/train_step.h): masked cross-entropy over the global batch, clip at
    // 1, AdamW; its context is ctx's twin (the caching allocator, no arena).
    train::TrainStep train_step(net, opt, train::StepConfig{/*clip_grad=*/1.0, {}});
    train::MaskedCrossEntropy ce;
    int64_t sequences = B;
    model::Batch batch = packed > 0 ? packed_batch(cfg, B, T, packed, 99, &sequences) : bench::random_train_batch(cfg, B, T, 99);
    batch.input_ids = batch.input_ids.to(gpu);
    batch.labels = batch.labels.to(gpu);
    for (Tensor* t : {&batch.loss_mask, &batch.seq_idx, &batch.position_ids})
      if (t->defined()) *t = t->to(gpu);
    const std::vector<model::Batch> micro(static_cast<size_t>(accum), batch);
    const double micro_tokens = static_cast<double>(B * T), tokens = micro_tokens * accum;

    double loss = 0, norm = 0;
    int64_t iteration = 0;
    auto step = [&] {
      const train::StepResult r = train_step.run(micro, ce, 1e-4, ++iteration);
      loss = r.loss, norm = r.grad_norm;
    };
    step();  // warm-up: allocator, cuBLASLt heuristics
    const int64_t waits_before = host_waits();
    step();  // one more, counting the host's waits for the GPU in it
    const int64_t waits_per_step = host_waits() - waits_before;
    const double step_ms = median_cuda_ms(ctx, steps, step, 0);  // step() above was the warm-up
    const double flops = 3.0 * net.forward_flops_per_token(T) * tokens;
    const double tflops = flops / (step_ms * 1e-3) / 1e12;
    const double tok_s = tokens / (step_ms * 1e-3);

    // By layer kind: each layer's forward + backward alone, the optimizer, and the head + loss
    // (what remains of a step).
    std::map<std::string, double> phase;
    Tensor u = ctx.empty({B, T, cfg.hidden_size}, DType::bf16);
    fill_uniform(u, Philox(5), -1.0, 1.0);
    double layers_ms = 0;
    for (const auto& m : net.mixers()) {
      double ms = median_cuda_ms(ctx, 3, [&] {
        std::unique_ptr<model::MixerSaved> saved;
        Tensor out = m->forward(ctx, u, &saved, batch.layout());
        m->backward(ctx, *saved, out);
      });
      phase[kind_name(m->kind())] += ms;
      layers_ms += ms;
    }
    phase["optimizer (grad norm + AdamW)"] = median_cuda_ms(ctx, 3, [&] {
      opt.clip_grad_norm(1.0);
      opt.step(1e-4);
    });
    phase["rest: embedding, norms, LM head + loss (derived)"] =
        std::max(0.0, (step_ms - phase["optimizer (grad norm + AdamW)"]) / accum - layers_ms);

    // One more step with every op between CUDA events (a second one: the first fills the event
    // pool). Its wall time minus the phases is what runs outside ops: launch gaps, host syncs
    // (MoE token counts, the loss read), gradient zeroing.
    cuda::CudaOpProfiler profiler;
    ctx.profiler = &profiler;
    train_step.context().profiler = &profiler;
    double profiled_ms = 0;
    cuda::OpPhaseTimes ph;
    for (int i = 0; i < 2; ++i) {
      profiled_ms = median_cuda_ms(ctx, 1, step, 0);
      ph = profiler.collect();
    }
    ctx.profiler = nullptr;
    train_step.context().profiler = nullptr;
    const double unattributed_ms = profiled_ms - ph.total_ms();
    const double gemm_ms = ph.ms_of(OpPhase::gemm);
    const double gemm_tflops = gemm_ms > 0 ? ph.gemm_flops / (gemm_ms * 1e-3) / 1e12 : 0.0;
    // Chunked-scan matmul FLOPs per forward (CB^T per group, then per head: intra-chunk output,
    // chunk states, inter-chunk output), the backward ~2x: the scan's rate inside the step.
    const double Q = static_cast<double>(cfg.chunk_size), N = static_cast<double>(cfg.ssm_state_size);
    const double scan_flops = 3.0 * tokens * static_cast<double>(count_kind(cfg, model::LayerKind::mamba)) *
                              (2.0 * Q * N * static_cast<double>(cfg.n_groups) +
                               static_cast<double>(cfg.mamba_num_heads) *
                                   (2.0 * Q * static_cast<double>(cfg.mamba_head_dim) +
                                    4.0 * static_cast<double>(cfg.mamba_head_dim) * N));
    const double scan_ms = ph.ms_of(OpPhase::ssd_scan);

    std::printf("device: %s | nemotron %s | config %s | %.1f M params | micro-batch %lld x seq %lld, %d per optimizer "
                "step = %.0f tokens/step\n",
                gpu.name().c_str(), NEMOTRON_VERSION, config.c_str(),
                static_cast<double>(net.params().numel()) / 1e6, static_cast<long long>(B), static_cast<long long>(T),
                accum, tokens);
    if (packed > 0)
      std::printf("packed rows (SFT): %lld sequences of ~%lld tokens in %lld rows; loss on %.0f%% of the tokens\n",
                  static_cast<long long>(sequences), static_cast<long long>(packed), static_cast<long long>(B),
                  100.0 * train::count_loss_tokens(packed_batch(cfg, B, T, packed, 99, &sequences)) / micro_tokens);
    if (lora > 0)
      std::printf("LoRA rank %lld on %s (dropout %g): %.2f M trainable of %.1f M parameters\n",
                  static_cast<long long>(lora), fmt::format("{}", fmt::join(lora_targets, ",")).c_str(), lora_dropout, static_cast<double>(net.params().trainable_numel()) / 1e6,
                  static_cast<double>(net.params().numel()) / 1e6);
    std::printf("%s bf16 GEMM peak (8192^3, cuBLASLt): %.1f TFLOP/s\n", peak_measured ? "measured" : "given", peak);
    std::printf("train step: %.2f ms | %.0f tokens/s | %.1f TFLOP/s model | MFU %.1f%% | loss %.4f | grad norm %.3f | "
                "peak memory %.2f GiB\n",
                step_ms, tok_s, tflops, 100.0 * tflops / peak, loss, norm,
                static_cast<double>(gpu.peak_bytes()) / (1ull << 30));
    std::printf("op phases of one profiled step (%.2f ms with an event pair per op; median step %.2f ms):\n",
                profiled_ms, step_ms);
    std::printf("  %-14s %9s %7s %7s\n", "phase", "ms/step", "%", "calls");
    for (OpPhase p : all_op_phases())
      std::printf("  %-14s %9.2f %6.1f%% %7lld\n", op_phase_name(p), ph.ms_of(p), 100.0 * ph.ms_of(p) / profiled_ms,
                  static_cast<long long>(ph.calls_of(p)));
    std::printf("  %-14s %9.2f %6.1f%%          (launch gaps, host syncs, memsets outside ops)\n", "unattributed",
                unattributed_ms, 100.0 * unattributed_ms / profiled_ms);
    std::printf("host waits for the GPU per step: %lld (copies back, stream synchronises; core/host_waits.h)\n",
                static_cast<long long>(waits_per_step));
    std::vector<std::pair<std::string, double>> gaps(ph.gap_before_ms.begin(), ph.gap_before_ms.end());
    std::sort(gaps.begin(), gaps.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    std::printf("GPU idle between ops, by the op that came next (ms per step):");
    for (size_t i = 0; i < gaps.size() && i < 9; ++i)
      std::printf("%s%s %.3f", i % 3 == 0 ? "\n  " : " | ", gaps[i].first.c_str(), gaps[i].second);
    std::printf("\n");
    std::printf("GEMM: %.1f TFLOP/s (%.2f TFLOP issued per step, %.0f%% of the measured peak)", gemm_tflops,
                ph.gemm_flops / 1e12, 100.0 * gemm_tflops / peak);
    if (scan_ms > 0) std::printf(" | SSD scan: %.1f TFLOP/s (matmul FLOPs, backward at 2x)", scan_flops / (scan_ms * 1e-3) / 1e12);
    std::printf("\n");
    std::vector<std::pair<std::string, cuda::OpPhaseTimes::Op>> by_op(ph.ops.begin(), ph.ops.end());
    std::sort(by_op.begin(), by_op.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    std::printf("ops by time (ms per step, calls):");
    for (size_t i = 0; i < by_op.size() && i < 14; ++i)
      std::printf("%s%s [%s] %.2f (%lld)", i % 3 == 0 ? "\n  " : " | ", by_op[i].first.c_str(),
                  op_phase_name(by_op[i].second.phase), by_op[i].second.ms, static_cast<long long>(by_op[i].second.calls));
    std::printf("\n");
    // Every op of the elementwise phase: what fusing would remove (norms, conv, activations, casts).
    std::printf("elementwise phase by op (ms per step, calls, us per call):");
    nlohmann::json elementwise_ops = nlohmann::json::object();
    int shown = 0;
    for (const auto& [name, op] : by_op) {
      if (op.phase != OpPhase::elementwise) continue;
      std::printf("%s%s %.2f (%lld, %.0f)", shown++ % 3 == 0 ? "\n  " : " | ", name.c_str(), op.ms,
                  static_cast<long long>(op.calls), 1e3 * op.ms / static_cast<double>(std::max<int64_t>(1, op.calls)));
      elementwise_ops[name] = {{"ms", op.ms}, {"calls", op.calls}};
    }
    std::printf("\n");
    std::printf("by layer kind (ms per micro-batch; each layer's forward + backward timed alone, the rest derived;\n"
                "the optimizer once per step):\n");
    for (const auto& [name, ms] : phase) std::printf("  %-62s %9.2f  (%4.1f%%)\n", name.c_str(), ms, 100.0 * ms / step_ms);

    nlohmann::json rec = {{"config", config},   {"batch", B},           {"seq_len", T},
                          {"grad_accum", accum}, {"packed_mean_len", packed}, {"lora_rank", lora}, {"lora_targets", lora > 0 ? lora_targets : std::vector<std::string>{}}, {"lora_dropout", lora_dropout}, {"step_ms", step_ms}, {"tokens_per_s", tok_s}, {"model_tflops", tflops},
                          {"gemm_peak_tflops", peak}, {"mfu", tflops / peak}, {"device", gpu.name()},
                          {"version", NEMOTRON_VERSION},
                          {"commit", bench::commit_or_unknown()}, {"params", net.params().numel()}};
    nlohmann::json phases = nlohmann::json::object();
    for (OpPhase p : all_op_phases()) phases[op_phase_name(p)] = {{"ms", ph.ms_of(p)}, {"calls", ph.calls_of(p)}};
    phases["unattributed"] = {{"ms", unattributed_ms}};
    rec["op_phases"] = phases;
    rec["profiled_step_ms"] = profiled_ms;
    rec["host_waits_per_step"] = waits_per_step;
    nlohmann::json gap_json = nlohmann::json::object();
    for (size_t i = 0; i < gaps.size() && i < 9; ++i) gap_json[gaps[i].first] = gaps[i].second;
    rec["gap_before_ms"] = gap_json;
    rec["elementwise_ops"] = elementwise_ops;
    rec["gemm_tflops"] = gemm_tflops;
    rec["gemm_flops_per_step"] = ph.gemm_flops;
    if (reference) {
      if (!ref.is_null()) {
        const double ref_tok = ref.at("tokens_per_s").get<double>();
        std::printf("transformers %s NemotronHForCausalLM (%s; micro-batch %d x %d per step): %.2f ms/step, %.0f "
                    "tokens/s, MFU %.1f%% -> nemotron is %.1fx\n",
                    ref.value("transformers", "?").c_str(), ref.value("path", "?").c_str(), ref.value("batch", 0),
                    ref.value("grad_accum", 0), ref.at("step_ms").get<double>(), ref_tok, 100.0 * (3.0 * net.forward_flops_per_token(T) * ref_tok / 1e12) / peak,
                    tok_s / ref_tok);
        rec["transformers"] = ref;
        rec["speedup_vs_transformers"] = tok_s / ref_tok;
      } else {
        std::printf("transformers reference failed: %s\n", ref_failure.c_str());
      }
    }
    bench::append_result(results, rec);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}

