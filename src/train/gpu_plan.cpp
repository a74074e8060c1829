#include "train/gpu_plan.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "model/hybrid_model.h"
#include "model/layer_spec.h"
#include "model/model_info.h"
#include "train/plan.h"

namespace nemotron::train {

namespace {

using model::LayerKind;
using model::LayerSpec;
using model::ModelConfig;

constexpr double kBf16 = 2, kF32 = 4;

// The layers one micro-batch runs: the trunk's, then each MTP depth's (depth k runs block
// k mod num_nextn_predict_layers).
struct Passes {
  std::vector<LayerSpec> trunk, mtp;  // mtp: every depth's layers
  int64_t depths = 0;
};
Passes passes(const ModelConfig& c) {
  Passes p{model::layer_specs(c), {}, c.mtp_depths()};
  for (int64_t d = 0; d < p.depths; ++d)
    for (const LayerSpec& s : model::mtp_layer_specs(c, d % std::max<int64_t>(1, c.num_nextn_predict_layers)))
      p.mtp.push_back(s);
  return p;
}

int64_t count_kind(const std::vector<LayerSpec>& specs, bool (*pick)(LayerKind)) {
  return std::count_if(specs.begin(), specs.end(), [&](const LayerSpec& s) { return pick(s.kind); });
}
bool is_split(LayerKind k) { return k != LayerKind::linear; }
bool is_moe(LayerKind k) { return k == LayerKind::moe; }

// Values per token a layer keeps in bf16 (the float32 rstd counts as 2): with recompute only its
// residual input and norm statistics, else also the mixer's input and its tensors. Under
// sequence parallelism (`S` = TP, else 1) the residual stream and the norm are on N / S rows, and a
// split mixer keeps the input it gathered whole.
double layer_kept(const ModelConfig& c, const LayerSpec& s, int64_t T, double S, bool recompute) {
  const double H = static_cast<double>(c.hidden_size);
  if (recompute) return (H + 2) / S;
  return (H + 2) / S + (is_split(s.kind) ? H : H / S) + mixer_saved_per_token(model::sized_for(c, s), s.kind, T);
}

// Ring algorithms: what each of n ranks sends for a buffer of b bytes.
double all_reduce_sent(double b, int n) { return 2.0 * (n - 1) / n * b; }
double spread_sent(double b, int n) { return static_cast<double>(n - 1) / n * b; }  // RS, AG, all-to-all

int nodes_spanned(const std::vector<int>& ranks, int64_t per_node) {
  if (per_node <= 0) return 0;
  std::set<int64_t> nodes;
  for (int r : ranks) nodes.insert(r / per_node);
  return static_cast<int>(nodes.size());
}

parallel::RankLayout layout_of(const GpuPlanInput& in) {
  return parallel::RankLayout(in.model.parallel, in.world, model::layout_facts(in.model), "plan");
}

std::string nodes_text(int nodes) {
  if (nodes == 0) return "";
  return nodes == 1 ? ", inside a node" : fmt::format(", across {} nodes", nodes);
}

}  // namespace

// What each mixer's saved struct holds beyond its input (model/*_mixer.h), per token; the probe
// in gpu_plan_test.cpp measures them on the CPU.
double mixer_saved_per_token(const ModelConfig& c, LayerKind kind, int64_t T) {
  const double t = static_cast<double>(T);
  switch (kind) {
    case LayerKind::mamba:  // the in_proj output (z, x, B, C, dt), the conv outputs (x, B, C), the scan
                            // output, the gated norm's rstd
      return static_cast<double>(c.mamba_in_proj_dim() + c.mamba_conv_dim() + c.mamba_d_inner() + c.n_groups) / t;
    case LayerKind::attention: {  // q, k, v, attention output, lse: per head
      const double hd = static_cast<double>(c.attn_head_dim());
      const double nq = static_cast<double>(c.num_attention_heads), nkv = static_cast<double>(c.num_key_value_heads);
      return ((2 * nq + 2 * nkv) * hd + nq) / t;
    }
    case LayerKind::mlp:  // the up (and gate) projection outputs
      return static_cast<double>((c.gated_mlp() ? 2 : 1) * c.intermediate_size) / t;
    case LayerKind::moe: {
      // Whole: router scores, choices, weights and the dispatch permutation, each routed slot's
      // input and (partial) output, the latent combine. Split: each slot's up output, the shared
      // expert's.
      const double K = static_cast<double>(c.num_experts_per_tok), de = static_cast<double>(c.moe_expert_dim());
      double v = static_cast<double>(c.n_routed_experts) + 4 * K + K * 2 * de +
                 (K * static_cast<double>(c.moe_intermediate_size) +
                  static_cast<double>(c.moe_shared_expert_intermediate_size * c.n_shared_experts)) /
                     t;
      if (c.moe_latent_size > 0) v += de;
      return v;
    }
    case LayerKind::linear: return 0;  // only its input, counted with the layer
  }
  return 0;
}

GpuPlanInput gpu_plan_input(const TrainLoopConfig& cfg, const model::ModelConfig& model, int world,
                            int64_t ranks_per_node, int64_t lora_params) {
  GpuPlanInput in;
  in.model = model;
  in.world = world;
  in.micro_batch_size = cfg.train.micro_batch_size;
  in.global_batch_size = cfg.train.global_batch_size;
  in.seq_length = cfg.seq_length;
  in.distributed_optimizer = cfg.ddp.shards_optimizer();
  in.fsdp = cfg.ddp.shards_params();
  in.fsdp_grads = cfg.ddp.shards_grads();
  in.lora_params = lora_params;
  in.ranks_per_node = ranks_per_node;
  return in;
}

// Full parameter sharding's gathered weights (elements): the parameters outside the trunk's layers
// and twice its largest layer, each layer kind's size the difference between the model with two
// layers of that kind and with one.
double fsdp_gathered_elements(const ModelConfig& c, const model::ModelShard& shard) {
  auto with = [&](const std::string& pattern) {
    ModelConfig k = c;
    k.hybrid_override_pattern = pattern;
    return static_cast<double>(model::shard_params(k, shard).total);
  };
  double largest = 0, outer = 0;
  for (const char ch : c.hybrid_override_pattern) {
    if (c.hybrid_override_pattern.find(ch) != c.hybrid_override_pattern.find_first_of(ch)) continue;
    const double one = with(std::string(1, ch)), layer = with(std::string(2, ch)) - one;
    largest = std::max(largest, layer);
    outer = one - layer;
  }
  return outer + 2 * largest;
}

GpuMemory gpu_memory(const GpuPlanInput& in, const parallel::RankLayout& layout) {
  const ModelConfig& c = in.model;
  const int64_t T = layout.tensor();
  GpuMemory m;
  m.params = model::shard_params(c, model::ModelShard{0, layout.expert(), 0, layout.tensor()});
  m.trainable = in.lora_params >= 0 ? in.lora_params : m.params.trainable();
  const double P = static_cast<double>(m.params.total + std::max<int64_t>(in.lora_params, 0)),
               Tr = static_cast<double>(m.trainable);
  // What the distributed optimizer shards: every trainable parameter except expert-parallel
  // experts, whose state stays whole on the rank that holds them (train/adamw.h).
  const double E = in.lora_params < 0 && layout.expert() > 1 ? static_cast<double>(m.params.routed_experts) : 0.0;
  const double D = Tr - E, shards = in.distributed_optimizer ? layout.data() : 1;
  const bool fsdp = in.fsdp && shards > 1;
  const bool grads_sharded = (in.fsdp || in.fsdp_grads) && shards > 1 && in.lora_params < 0;
  const double units =
      fsdp || grads_sharded ? fsdp_gathered_elements(c, model::ModelShard{0, layout.expert(), 0, layout.tensor()}) : 0.0;
  if (fsdp) m.gathered = kBf16 * units;
  m.weights = fsdp ? kBf16 * (P - D + D / shards) + m.gathered : kBf16 * P;
  // Sharded: each rank also holds its float32 gradient shard apart from the full buffer
  // (reduce-scatter does not write in place) and gathers the bf16 values through one buffer
  // (under full parameter sharding the layers' own buffers, counted with the weights). Sharded
  // gradients: no full buffer, but the units' whole gradients and their slices received.
  if (grads_sharded) m.grads_whole = kF32 * units * (1 + 1 / shards);
  m.grads = grads_sharded ? kF32 * (E + D / shards) + m.grads_whole + (fsdp ? 0.0 : kBf16 * D)
                          : kF32 * Tr + (shards > 1 ? kF32 * D / shards + (fsdp ? 0.0 : kBf16 * D) : 0.0);
  m.optimizer = 3 * kF32 * (D / shards + E);  // master, exp_avg, exp_avg_sq
  // Activations of one micro-batch: mbs x seq tokens, of which a context rank holds 1/CP
  // (model/context_split.h; the all-gathered K/V of one attention layer at a time not counted).
  const Passes ps = passes(c);
  const int64_t tokens = in.micro_batch_size * in.seq_length / layout.context();
  const double H = static_cast<double>(c.hidden_size), N = static_cast<double>(tokens);
  const double S = c.parallel.sequence_parallel && T > 1 ? static_cast<double>(T) : 1.0;
  for (const bool recompute : {false, true}) {
    // The final norm's input and output (the head gathers its rows under sequence parallelism).
    double per_token = (2 * H + 2) / S + (S > 1 ? H : 0.0);
    double busiest = 0;             // recompute: the layer whose forward is rerun holds its whole set meanwhile
    for (const std::vector<LayerSpec>* specs : {&ps.trunk, &ps.mtp})
      for (const LayerSpec& s : *specs) {
        per_token += layer_kept(c, s, T, S, recompute);
        if (recompute) busiest = std::max(busiest, layer_kept(c, s, T, S, false) - layer_kept(c, s, T, S, true));
      }
    per_token += static_cast<double>(ps.depths) * (5 * H + 6) / S;  // MTP: embedding, input, concat, output
    const int64_t V = c.vocab_size / T;  // the logits' columns on this rank, one chunk at a time
    const double logits = static_cast<double>(model::head_rows_per_chunk(V, DType::bf16, tokens)) *
                          static_cast<double>(V);
    (recompute ? m.activations_recompute : m.activations_kept) = kBf16 * ((per_token + busiest) * N + logits);
  }
  m.recompute = c.recompute_granularity == "full";
  return m;
}

std::vector<GroupTraffic> step_traffic(const GpuPlanInput& in, const parallel::RankLayout& layout) {
  const ModelConfig& c = in.model;
  const GpuMemory m = gpu_memory(in, layout);
  const Passes ps = passes(c);
  const double H = static_cast<double>(c.hidden_size), N = static_cast<double>(in.micro_batch_size * in.seq_length);
  const double micro = static_cast<double>(in.global_batch_size / (in.micro_batch_size * layout.data()));
  const bool recompute = c.recompute_granularity == "full";
  const int64_t split_layers = count_kind(ps.trunk, is_split) + count_kind(ps.mtp, is_split);
  const int64_t moe_layers = count_kind(ps.trunk, is_moe) + count_kind(ps.mtp, is_moe);
  const int64_t moe_registered = count_kind(model::layer_specs(c), is_moe) +
                                 c.num_nextn_predict_layers * static_cast<int64_t>(std::count(
                                     c.mtp_hybrid_override_pattern.begin(), c.mtp_hybrid_override_pattern.end(), 'E'));
  const double experts = in.lora_params < 0 && layout.expert() > 1 ? static_cast<double>(m.params.routed_experts) : 0;
  const double dense = static_cast<double>(m.trainable) - experts;
  std::vector<GroupTraffic> out;
  auto add = [&](std::string group, const std::vector<int>& ranks, std::string what, double buffer, double sent) {
    if (ranks.size() <= 1) return;
    out.push_back({std::move(group), static_cast<int>(ranks.size()), nodes_spanned(ranks, in.ranks_per_node),
                   std::move(what), buffer, sent});
  };
  const int dp = layout.data();
  if (in.fsdp && dp > 1)  // each layer's weights gathered for its forward and its backward, per micro-batch
    add("data", layout.data_group(0),
        fmt::format("reduce-scatter of {} float32 gradients, all-gather of their bf16 values twice per micro-batch "
                    "(full parameter sharding)",
                    model::human_count(dense)),
        (kF32 + 2 * micro * kBf16) * dense, spread_sent((kF32 + 2 * micro * kBf16) * dense, dp));
  else if (in.distributed_optimizer)
    add("data", layout.data_group(0),
        fmt::format("reduce-scatter of {} float32 gradients, all-gather of their bf16 values",
                    model::human_count(dense)),
        (kF32 + kBf16) * dense, spread_sent((kF32 + kBf16) * dense, dp));
  else
    add("data", layout.data_group(0), fmt::format("all-reduce of {} float32 gradients", model::human_count(dense)),
        kF32 * dense, all_reduce_sent(kF32 * dense, dp));
  if (experts > 0)
    add("expert-data", layout.expert_data_group(0),
        fmt::format("all-reduce of the {} float32 gradients of the held experts", model::human_count(experts)),
        kF32 * experts, all_reduce_sent(kF32 * experts, layout.expert_data()));
  const int tp = layout.tensor();
  if (tp > 1 && c.parallel.sequence_parallel) {
    // Sequence parallelism: each split layer all-gathers its input and reduce-scatters its output
    // (the adjoints in the backward, and the input gathered again by a recomputed forward); the
    // embedding reduce-scatters and the head gathers its rows (and back) per pass; the loss's
    // all-gather and the MoE combine weights as without. Per step: the whole parameters'
    // gradients, partial over the group (norms, MTP projections, whole mixers, latent projections).
    const double heads = static_cast<double>(1 + ps.depths), split = static_cast<double>(split_layers);
    const double spread = kBf16 * N * H * ((recompute ? 5 : 4) * split + 3 * heads) + heads * kF32 * 3 * N * tp;
    const double reduced = kF32 * N * static_cast<double>(c.num_experts_per_tok * moe_layers);
    const double whole = kF32 * static_cast<double>(m.params.whole);
    add("tensor", layout.tensor_group(0),
        fmt::format("{} micro-batch(es) x ({} all-gathers / reduce-scatters of [{} x {}] bf16 per split layer ({}), "
                    "the embedding's and head's, the loss's all-gather), the whole parameters' gradients",
                    micro, recompute ? 5 : 4, N, H, split_layers),
        micro * (spread + reduced) + whole,
        micro * (spread_sent(spread, tp) + all_reduce_sent(reduced, tp)) + all_reduce_sent(whole, tp));
  } else if (tp > 1) {
    // Per micro-batch: each split layer's output (forward) and input gradient (backward); the
    // vocab-parallel embedding's output and the head's input gradient per pass (trunk + MTP
    // depths); the MoE combine weights' gradient (float32 [N, K]); the loss's all-gather of 3
    // float32 numbers per row per head pass. Per step: the latent projections' partial gradients.
    const double heads = static_cast<double>(1 + ps.depths);
    const double reduced = kBf16 * N * H * (2.0 * static_cast<double>(split_layers) + 2 * heads) +
                           kF32 * N * static_cast<double>(c.num_experts_per_tok * moe_layers);
    const double gathered = heads * kF32 * 3 * N * tp;
    const double latent = kF32 * 2.0 * static_cast<double>(c.moe_latent_size * c.hidden_size * moe_registered);
    add("tensor", layout.tensor_group(0),
        fmt::format("{} micro-batch(es) x (2 all-reduces of [{} x {}] bf16 per split layer ({}), embedding and head "
                    "all-reduces, the loss's all-gather){}",
                    micro, N, H, split_layers, latent > 0 ? ", the latent gradients" : ""),
        micro * (reduced + gathered) + latent,
        micro * (all_reduce_sent(reduced, tp) + spread_sent(gathered, tp)) + all_reduce_sent(latent, tp));
  }
  const int ep = layout.expert();
  if (ep > 1) {
    const int per_layer = recompute ? 6 : 4;  // dispatch + combine, their backward (+ the rerun forward)
    const double rows = N * static_cast<double>(c.num_experts_per_tok) * static_cast<double>(c.moe_expert_dim());
    const double buffer = micro * static_cast<double>(per_layer * moe_layers) * kBf16 * rows;
    add("expert", layout.expert_group(0),
        fmt::format("{} micro-batch(es) x {} all-to-alls of [{} x top-{} x {}] bf16 rows per MoE layer ({})", micro,
                    per_layer, N, c.num_experts_per_tok, c.moe_expert_dim(), moe_layers),
        buffer, spread_sent(buffer, ep));
  }
  return out;
}

Knob find_knob(const GpuPlanInput& in, double gpu_bytes) {
  Knob best;
  if (const double now = gpu_memory(in, layout_of(in)).total(); now <= gpu_bytes) return {{}, now, true};
  double best_cost = 1e300;
  const ModelConfig& c = in.model;
  const parallel::ParallelSizes now = c.parallel;
  const int64_t per_node = in.ranks_per_node > 0 ? in.ranks_per_node : 8;
  // Candidates: each knob at its current value or turned; the cost says how much the change
  // slows a step (the distributed optimizer almost nothing; more expert parallelism an
  // all-to-all; tensor parallelism an all-reduce per layer; sequence parallelism the same bytes
  // in other collectives; recompute a third more compute; smaller micro-batches smaller GEMMs),
  // and the cheapest sum that fits wins.
  const bool fsdp_possible = now.tensor == 1 && now.expert == 1 && now.context == 1;
  for (const bool fsdp : {in.fsdp, !in.fsdp})
  for (const bool dist : {in.distributed_optimizer, true})
    for (int64_t ep = now.expert; ep <= std::max<int64_t>(now.expert, model::routed_experts(c)); ep *= 2)
      for (int64_t tp = now.tensor; tp <= std::max<int64_t>(now.tensor, per_node); tp *= 2)
        for (const bool rc : {c.recompute_granularity == "full", true})
          for (const bool sp : {now.sequence_parallel, true})
            for (int64_t mbs = in.micro_batch_size; mbs >= 1; mbs /= 2) {
              if (sp && (tp == 1 || in.seq_length % tp != 0)) continue;
              // Full parameter sharding runs with data parallelism alone (and shards the optimizer).
              if (fsdp && (!fsdp_possible || ep != now.expert || tp != now.tensor || sp != now.sequence_parallel || !dist))
                continue;
              double cost = 0;
              std::vector<std::string> o;
              // optim_grads stays where the layout stays data-parallel alone.
              const bool keeps_grads = fsdp || (in.fsdp_grads && fsdp_possible && ep == now.expert && tp == now.tensor &&
                                                sp == now.sequence_parallel);
              if (fsdp && !in.fsdp)
                cost += 2, o.push_back("ddp.use_megatron_fsdp=true"),
                    o.push_back("ddp.data_parallel_sharding_strategy=optim_grads_params");
              else if (!fsdp && (in.fsdp || (in.fsdp_grads && !keeps_grads)))  // back to the distributed
                o.push_back("ddp.data_parallel_sharding_strategy=optim");       // optimizer: FSDP does not run there
              else if (dist != in.distributed_optimizer) cost += 1, o.push_back("ddp.use_distributed_optimizer=true");
              if (sp != now.sequence_parallel) cost += 1, o.push_back("model.sequence_parallel=true");
              for (int64_t e = now.expert; e < ep; e *= 2) cost += 2;
              if (ep != now.expert) o.push_back(fmt::format("model.expert_model_parallel_size={}", ep));
              for (int64_t t = now.tensor; t < tp; t *= 2) cost += 3;
              if (tp != now.tensor) o.push_back(fmt::format("model.tensor_model_parallel_size={}", tp));
              if (rc != (c.recompute_granularity == "full")) cost += 4, o.push_back("model.recompute_granularity=full");
              for (int64_t b = in.micro_batch_size; b > mbs; b /= 2) cost += 4;
              if (mbs != in.micro_batch_size) o.push_back(fmt::format("train.micro_batch_size={}", mbs));
              if (o.empty() || cost > best_cost) continue;
              GpuPlanInput t = in;
              t.model.parallel.expert = ep;
              t.model.parallel.tensor = tp;
              t.model.parallel.sequence_parallel = sp;
              t.model.recompute_granularity = rc ? "full" : "";
              t.micro_batch_size = mbs;
              t.distributed_optimizer = dist;
              t.fsdp = fsdp;
              t.fsdp_grads = keeps_grads;
              double total = 0;
              try {
                const parallel::RankLayout l = layout_of(t);
                if (t.global_batch_size % (mbs * l.data()) != 0) continue;
                total = gpu_memory(t, l).total();
              } catch (const InputError&) {
                continue;  // a layout the model or the world does not divide
              }
              if (total > gpu_bytes || (cost == best_cost && total >= best.memory)) continue;
              best = {o, total, true};
              best_cost = cost;
            }
  return best;
}

namespace {

std::string knob_line(const GpuPlanInput& in, double need, double gpu_bytes) {
  const Knob k = find_knob(in, gpu_bytes);
  if (!k.fits)
    return fmt::format(
        "knob: nothing fits {} per GPU on {} GPU(s), even with the distributed optimizer or full parameter sharding, recompute, micro-batch 1, "
        "sequence parallelism and every tensor (within a node) and expert parallel size: use more nodes (about {:.0f}x the GPUs) or a smaller "
        "model",
        human_bytes(gpu_bytes), in.world, std::ceil(need / gpu_bytes));
  return fmt::format("knob: set {} (about {} per GPU)", fmt::join(k.overrides, " "), human_bytes(k.memory));
}

}  // namespace

std::string gpu_plan_text(const GpuPlanInput& in, double gpu_bytes, const std::string& gpu_source) {
  const parallel::RankLayout layout = layout_of(in);
  const GpuMemory m = gpu_memory(in, layout);
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  std::string where = fmt::format("{} GPU{}", in.world, in.world == 1 ? "" : "s");
  if (in.ranks_per_node > 0) where += fmt::format(" ({} per node)", in.ranks_per_node);
  line(fmt::format("--- per GPU: {} on {}, {} each ({}) ---", layout.describe(), where, human_bytes(gpu_bytes),
                   gpu_source));
  const double split = static_cast<double>(m.params.total - m.params.whole - m.params.routed_experts);
  const int64_t experts = model::routed_experts(in.model);
  line(fmt::format("  parameters        {:>12}  (split over TP {}: {}, whole on every TP rank: {}{})",
                   model::human_count(static_cast<double>(m.params.total)), layout.tensor(), model::human_count(split),
                   model::human_count(static_cast<double>(m.params.whole)),
                   experts == 0 ? std::string()
                                : fmt::format(", routed experts {} of {}: {}", experts / layout.expert(), experts,
                                              model::human_count(static_cast<double>(m.params.routed_experts)))));
  line(fmt::format("  weights           {:>12}  (bf16{})", human_bytes(m.weights),
                   m.gathered > 0 ? fmt::format(", split over {} data-parallel ranks by full parameter sharding + {} "
                                                "gathered: the embedding, head and MTP whole, two of the largest layer",
                                                layout.data(), human_bytes(m.gathered))
                                  : std::string()));
  line(fmt::format("  gradients         {:>12}  (float32{})", human_bytes(m.grads),
                   m.grads_whole > 0
                       ? fmt::format(", split over {} data-parallel ranks by gradient sharding + {} whole: the embedding, "
                                     "head and MTP, two of the largest layer, the slices received{}",
                                     layout.data(), human_bytes(m.grads_whole),
                                     m.gathered > 0 ? "" : "; + the bf16 gather buffer")
                   : in.distributed_optimizer && layout.data() > 1
                       ? (m.gathered > 0 ? ", the whole buffer + the rank's shard" : ", + the rank's shard and the bf16 gather buffer")
                       : ""));
  line(fmt::format("  optimizer         {:>12}  (float32 masters + Adam moments, {})", human_bytes(m.optimizer),
                   in.distributed_optimizer && layout.data() > 1
                       ? fmt::format("split over {} data-parallel ranks", layout.data())
                       : std::string("whole: ddp.use_distributed_optimizer is off")));
  line(fmt::format("  activations       {:>12}  (one micro-batch of {} x {} tokens, bf16){}",
                   human_bytes(m.activations_kept), in.micro_batch_size, in.seq_length, m.recompute ? "" : " <- in use"));
  line(fmt::format("    with recompute  {:>12}  (model.recompute_granularity=full){}", human_bytes(m.activations_recompute),
                   m.recompute ? " <- in use" : ""));
  const bool fits = m.total() <= gpu_bytes;
  line(fmt::format("  per GPU           {:>12}  {}", human_bytes(m.total()),
                   fits ? fmt::format("fits {}", human_bytes(gpu_bytes))
                        : fmt::format("DOES NOT FIT {}", human_bytes(gpu_bytes))));
  const std::vector<GroupTraffic> traffic = step_traffic(in, layout);
  line(fmt::format("  communication per optimizer step ({} micro-batch(es) per rank; buffers, then what each rank sends "
                   "with ring algorithms):",
                   in.global_batch_size / (in.micro_batch_size * layout.data())));
  if (traffic.empty()) line("    none (one rank)");
  for (const GroupTraffic& g : traffic)
    line(fmt::format("    {:<11} {:>3} ranks{}: {} -> sends {}; {}", g.group, g.size, nodes_text(g.nodes),
                     human_bytes(g.buffer_bytes), human_bytes(g.sent_bytes), g.what));
  if (!fits) line("  " + knob_line(in, m.total(), gpu_bytes));
  return out;
}

std::string gpu_memory_shortfall(const GpuPlanInput& in, double have) {
  if (have <= 0) return "";
  const GpuMemory m = gpu_memory(in, layout_of(in));
  if (m.total() <= have) return "";
  return fmt::format(
      "does not fit one GPU: about {} per GPU (bf16 weights {}, float32 gradients {}, float32 masters + Adam "
      "moments {}, activations of one micro-batch {}) but {} is available; {}",
      human_bytes(m.total()), human_bytes(m.weights), human_bytes(m.grads), human_bytes(m.optimizer),
      human_bytes(m.activations()), human_bytes(have), knob_line(in, m.total(), have));
}

}  // namespace nemotron::train
