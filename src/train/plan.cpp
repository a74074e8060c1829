#include "train/plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/hybrid_model.h"
#include "model/layer_spec.h"
#include "model/model_info.h"
#include "train/gpu_plan.h"

namespace nemotron::train {

namespace {

std::string lr_at(const LrSchedule& s, int64_t iteration, int64_t gbs) {
  return fmt::format("{:.4E}", s.lr((iteration - 1) * gbs));
}

}  // namespace

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) b /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

// Bytes per sample of the in-memory data indices: the GPT dataset's sample index (2 x int64) and
// shuffle index (int64), the blend's dataset index (int16) and per-dataset sample index (int64).
// The document index (int32 per document per epoch) depends on the data and is not counted.
constexpr double kIndexBytesPerSample = 16 + 8 + 2 + 8;

MemoryEstimate estimate_memory(const PretrainConfig& cfg) {
  MemoryEstimate m = estimate_memory(cfg.model, cfg.train.micro_batch_size, cfg.dataset.seq_length);
  if (!cfg.dataset.mock) {  // mock data draws tokens on the fly; .bin/.idx data is indexed up front
    const TrainSection& t = cfg.train;
    m.indexed_samples = (t.train_iters + 2 * t.eval_iters) * t.global_batch_size;  // train, valid, test
    m.index_bytes = kIndexBytesPerSample * static_cast<double>(m.indexed_samples);
  }
  return m;
}

std::string host_memory_shortfall(const PretrainConfig& cfg, double have) {
  const MemoryEstimate m = estimate_memory(cfg);
  const double need = cfg.on_cuda() ? m.index_bytes : m.total();
  if (have <= 0 || need <= 0.9 * have) return "";
  if (m.index_bytes >= 0.5 * need)
    return fmt::format(
        "the data's sample indices ({} samples: train.train_iters {} x train.global_batch_size {}, plus "
        "validation) need about {} of host memory, this machine has {}; lower train.train_iters (see the plan "
        "with --dry-run)",
        model::format_count(m.indexed_samples), cfg.train.train_iters, cfg.train.global_batch_size,
        human_bytes(m.index_bytes), human_bytes(have));
  return fmt::format("training this model on the CPU needs about {} ({} parameters), this machine has {}; see the "
                     "plan with --dry-run, or use -c tiny",
                     human_bytes(m.total()), model::human_count(static_cast<double>(m.params)), human_bytes(have));
}

MemoryEstimate estimate_memory(const model::ModelConfig& model, int64_t micro_batch_size, int64_t seq_length,
                               int64_t trainable) {
  const model::ModelInfo info = model::model_info(model, seq_length);
  MemoryEstimate m;
  m.params = info.total_params + std::max<int64_t>(trainable, 0);
  m.trainable = trainable;
  int64_t moe_layers = 0;
  for (const model::LayerSpec& l : model::layer_specs(model)) moe_layers += l.kind == model::LayerKind::moe;
  for (int64_t b = 0; b < model.num_nextn_predict_layers; ++b)
    for (const model::LayerSpec& l : model::mtp_layer_specs(model, b)) moe_layers += l.kind == model::LayerKind::moe;
  const int64_t per_expert = 2 * model.moe_expert_dim() * model.moe_intermediate_size +
                             (model.mlp_bias ? model.moe_expert_dim() + model.moe_intermediate_size : 0);
  m.routed_expert_params = moe_layers * model.n_routed_experts * per_expert;
  const double P = static_cast<double>(m.params), T = trainable < 0 ? P : static_cast<double>(trainable);
  m.param_bytes = 4 * P;
  m.grad_bytes = 4 * T;  // a frozen parameter has no gradient and no moments
  m.moment_bytes = 8 * T;
  double per_token = 2.0 * static_cast<double>(model.hidden_size);  // final norm input and output
  for (const model::LayerSpec& l : model::layer_specs(model))
    per_token += 2.0 * static_cast<double>(model.hidden_size) + 1 +  // residual input, norm output, rstd
                 mixer_saved_per_token(model::sized_for(model, l), l.kind);
  const double tokens = static_cast<double>(micro_batch_size) * static_cast<double>(seq_length);
  // Plus one chunk of logits, whose gradient overwrites it in place.
  const double head_rows =
      static_cast<double>(model::head_rows_per_chunk(model.vocab_size, DType::f32, micro_batch_size * seq_length));
  m.activation_bytes = 4 * (per_token * tokens + head_rows * static_cast<double>(model.vocab_size));
  return m;
}

std::string dry_run_text(const PretrainConfig& cfg, const std::string& recipe, size_t overrides) {
  const DatasetSection& d = cfg.dataset;
  std::string data;
  if (d.mock)
    data = fmt::format("data: mock (synthetic Markov-chain tokens, seed {}){}", d.random_seed,
                       d.has_blend() || !d.per_split_data_args_path.empty() ? "; the configured files are not used" : "");
  else if (d.has_blend())
    data = fmt::format("data: blend {}, split {}, seed {}", d.blend.dump(), d.split.empty() ? "969,30,1" : d.split,
                       d.random_seed);
  else
    data = fmt::format("data: blend per split from {}, seed {}", d.per_split_data_args_path, d.random_seed);
  return dry_run_text(cfg, cfg.model, data, estimate_memory(cfg), recipe, overrides);
}

std::string dry_run_text(const TrainLoopConfig& cfg, const model::ModelConfig& mc, const std::string& data_line,
                         const MemoryEstimate& mem, const std::string& recipe, size_t overrides) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  const TrainSection& t = cfg.train;
  const model::ModelInfo info = model::model_info(mc, cfg.seq_length);
  const LrSchedule s = cfg.lr_schedule();
  const int64_t G = t.global_batch_size;

  line(fmt::format("recipe: {}{}", recipe, overrides ? fmt::format(" (+ {} override(s))", overrides) : ""));
  line("--- resolved config ---");
  out += config_to_yaml(cfg.tree);
  line("--- model ---");
  line(fmt::format("  {} layers \"{}\", hidden {}, vocab {}", mc.num_layers(), mc.hybrid_override_pattern,
                   mc.hidden_size, mc.vocab_size));
  line(fmt::format("  parameters        {:>20}  ({})", model::format_count(info.total_params),
                   model::human_count(static_cast<double>(info.total_params))));
  line(fmt::format("  active per token  {:>20}  ({})", model::format_count(info.active_params),
                   model::human_count(static_cast<double>(info.active_params))));
  if (info.mtp_params > 0)
    line(fmt::format("  of which MTP      {:>20}  ({} depth{}, loss weight {})", model::format_count(info.mtp_params),
                     mc.mtp_depths(), mc.mtp_depths() == 1 ? "" : "s", mc.mtp_loss_scaling_factor));
  line(fmt::format("  training compute  {} per token at seq {}", model::human_flops(info.training_flops_per_token),
                   cfg.seq_length));

  line("--- plan ---");
  const double tokens = static_cast<double>(t.train_iters) * static_cast<double>(cfg.tokens_per_step());
  line(fmt::format("  {} iterations of global batch {} = micro-batch {} x {} accumulation step(s), seq {}",
                   t.train_iters, G, t.micro_batch_size, t.accumulation_steps(), cfg.seq_length));
  line(fmt::format("  {} tokens per iteration, {} tokens in all, {} of training compute",
                   model::format_count(cfg.tokens_per_step()), model::human_count(tokens),
                   model::human_flops(info.training_flops_per_token * tokens)));
  std::string sched = fmt::format("  lr: {} {:.3g} -> {:.3g}", lr_decay_style_name(s.style), s.max_lr, s.min_lr);
  if (s.style == LrDecayStyle::wsd) sched += fmt::format(" ({} anneal)", wsd_decay_style_name(s.wsd_style));
  line(sched + fmt::format(", AdamW betas ({}, {}) eps {:.1e} weight decay {}, clip {}", cfg.optimizer.adam_beta1,
                           cfg.optimizer.adam_beta2, cfg.optimizer.adam_eps, cfg.optimizer.weight_decay,
                           cfg.optimizer.clip_grad));
  const int64_t warm_end = s.warmup_steps / G + 1, decay_end = s.decay_steps / G + 1;
  // Iteration i updates with lr(samples before it) = lr((i - 1) * G).
  line(fmt::format(
      "    iteration 1: {} | end of warmup ({}): {}{}{} | last ({}): {}", lr_at(s, 1, G), warm_end,
      lr_at(s, warm_end, G),
      s.style == LrDecayStyle::wsd ? fmt::format(" | anneal after {} iterations", s.anneal_start() / G) : std::string(),
      decay_end <= t.train_iters ? fmt::format(" | min_lr from iteration {}", decay_end) : std::string(), t.train_iters,
      lr_at(s, t.train_iters, G)));
  line(t.eval_iters > 0
           ? fmt::format("  validation: {} x {} sequences{}", t.eval_iters, G,
                         t.eval_interval > 0 ? fmt::format(" every {} iterations and at the end", t.eval_interval)
                                             : std::string(" at the end"))
           : "  validation: none");
  const CheckpointSection& k = cfg.checkpoint;
  line(k.save.empty()
           ? "  checkpoints: none (checkpoint.save is empty)"
           : fmt::format("  checkpoints: {}/iter_XXXXXXX {}, keep {}", k.save,
                         k.save_interval > 0 ? fmt::format("every {} iterations and at the end", k.save_interval)
                                             : std::string("at the end"),
                         k.most_recent_k < 0 ? std::string("all") : std::to_string(k.most_recent_k)));
  if (!k.load.empty()) line(fmt::format("  {} from: {}", k.finetune ? "weights" : "resume", k.load));
  if (!k.pretrained_checkpoint.empty())
    line(fmt::format("  weights from: {} (checkpoint.pretrained_checkpoint{})", k.pretrained_checkpoint,
                     k.load.empty() ? "" : ", when checkpoint.load holds no checkpoint yet"));
  line("  " + data_line);
  const MoeSection& m = cfg.moe;
  if (m.moe_router_enable_expert_bias || m.seq_aux_loss())
    line(fmt::format("  moe balancing:{}{}",
                     m.moe_router_enable_expert_bias
                         ? fmt::format(" expert-bias update rate {}", m.moe_router_bias_update_rate)
                         : std::string(),
                     m.seq_aux_loss() ? fmt::format(" seq_aux_loss coeff {}", m.moe_aux_loss_coeff) : std::string()));

  line("--- memory (rough; one process, float32 as on the CPU) ---");
  if (mem.trainable >= 0)
    line(fmt::format("  trainable params: {} of {} ({:.2f}%): LoRA adapters; the frozen base has no gradients, masters "
                     "or moments",
                     model::human_count(static_cast<double>(mem.trainable)),
                     model::human_count(static_cast<double>(mem.params)),
                     100.0 * static_cast<double>(mem.trainable) / static_cast<double>(mem.params)));
  line(fmt::format("  parameters        {:>12}", human_bytes(mem.param_bytes)));
  line(fmt::format("  gradients         {:>12}", human_bytes(mem.grad_bytes)));
  line(fmt::format("  Adam moments      {:>12}", human_bytes(mem.moment_bytes)));
  line(fmt::format("  activations       {:>12}  (one micro-batch of {} x {} tokens)", human_bytes(mem.activation_bytes),
                   t.micro_batch_size, cfg.seq_length));
  if (mem.indexed_samples > 0)
    line(fmt::format("  data indices      {:>12}  (sample, shuffle and blend indices of {} samples, in host memory)",
                     human_bytes(mem.index_bytes), model::format_count(mem.indexed_samples)));
  line(fmt::format("  total             {:>12}", human_bytes(mem.total())));
  line(fmt::format("  on a GPU in bf16 with fp32 master weights and moments (18 B/param{}), unsharded: {}",
                   mem.trainable >= 0 ? "; 2 B per frozen param" : "",
                   human_bytes(mem.gpu_mixed_precision_total())));
  line("nothing was run (--dry-run)");
  return out;
}

}  // namespace nemotron::train
