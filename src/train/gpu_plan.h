// The planner (issue 23 §5): what one GPU of a parallel layout holds and sends, from the configs
// alone, for `--dry-run` and for the check before a real run.
//  - Memory per GPU: the parameters the rank registers (model/shard_sizes.h: tensor-split
//    tensors 1/TP, whole ones in full, routed experts E/EP) as bf16 weights; float32 gradients;
//    float32 masters + Adam moments (split over the data group by the distributed optimizer, which
//    leaves expert-parallel experts whole, train/adamw.h); the activations one micro-batch keeps
//    for the backward in bf16, with and without model.recompute_granularity=full. Tensor
//    parallelism divides what lives inside a mixer (heads, widths, the logits' vocabulary); the
//    residual stream and the normed input are whole on every rank unless model.sequence_parallel
//    splits the stream's rows (a split mixer still keeps the input it gathers whole).
//    Transient buffers, allocator slack and the MoE's routing imbalance are not counted.
//  - Communication per optimizer step per group: the bytes of the collectives' buffers and the
//    bytes each rank sends over the wire with ring algorithms (all-reduce 2(n-1)/n of the buffer,
//    reduce-scatter, all-gather and all-to-all (n-1)/n), and how many nodes one group spans.
//    Full parameter sharding (FSDP's optim_grads_params) divides the dense bf16 weights by the data
//    group and adds its gathered buffers (the non-layer unit whole, two of the largest layer);
//    gradient sharding (optim_grads and optim_grads_params) the float32 gradients likewise.
//  - The knob: when the total exceeds the GPU, the cheapest change of layout, optimizer or weight
//    sharding, recompute or micro-batch that fits, found by planning each candidate.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/shard_sizes.h"
#include "parallel/rank_layout.h"
#include "train/train_loop_config.h"

namespace nemotron::train {

struct GpuPlanInput {
  model::ModelConfig model;  // with its parallel sizes and recompute_granularity
  int world = 1;
  int64_t micro_batch_size = 1, seq_length = 1, global_batch_size = 1;
  bool distributed_optimizer = false;
  // Full parameter sharding (ddp.data_parallel_sharding_strategy=optim_grads_params, which implies
  // the distributed optimizer): the sharded bf16 weights 1/D per rank, plus what is gathered whole
  // (train/param_gather.h: everything outside the trunk's layers, and two slots of its largest
  // layer).
  bool fsdp = false;
  // Sharded gradients (optim_grads, and optim_grads_params with fsdp): float32 gradients 1/D per
  // rank, plus whole ones for the same units (train/grad_slots.h) and their receive buffers.
  bool fsdp_grads = false;
  int64_t lora_params = -1;    // >= 0: only LoRA adapters (this many) train; the base is frozen
  int64_t ranks_per_node = 0;  // 0: unknown (no launch profile)
};
GpuPlanInput gpu_plan_input(const TrainLoopConfig& cfg, const model::ModelConfig& model, int world,
                            int64_t ranks_per_node = 0, int64_t lora_params = -1);

struct GpuMemory {
  model::ShardParams params;  // this rank's
  int64_t trainable = 0;
  double weights = 0, grads = 0, optimizer = 0;
  double gathered = 0;  // of weights: full parameter sharding's gathered buffers
  double grads_whole = 0;  // of gradients: sharded gradients' layer slots, outer unit, receive buffers
  double activations_kept = 0, activations_recompute = 0;  // one micro-batch, without / with recompute
  bool recompute = false;                                   // which of the two the run uses
  double activations() const { return recompute ? activations_recompute : activations_kept; }
  double total() const { return weights + grads + optimizer + activations(); }
};
// Rank 0 of `layout` (every rank holds the same sizes: the splits are even).
GpuMemory gpu_memory(const GpuPlanInput& in, const parallel::RankLayout& layout);

// Values per token one layer's mixer keeps for its backward when tensor parallelism is `tensor`
// (the layer's residual input, norm output and statistics not included).
double mixer_saved_per_token(const model::ModelConfig& c, model::LayerKind kind, int64_t tensor = 1);

struct GroupTraffic {
  std::string group;  // data, expert-data, tensor, expert
  int size = 1;
  int nodes = 0;  // nodes one group spans (0: unknown)
  std::string what;
  double buffer_bytes = 0, sent_bytes = 0;  // per optimizer step, per rank
};
// Groups of more than one rank that communicate in a step.
std::vector<GroupTraffic> step_traffic(const GpuPlanInput& in, const parallel::RankLayout& layout);

// The cheapest change that makes the plan fit `gpu_bytes`, as key=value overrides: `fits` with no
// overrides when it fits already, not `fits` when nothing tried does; `memory` is the total then.
struct Knob {
  std::vector<std::string> overrides;
  double memory = 0;
  bool fits = false;
};
Knob find_knob(const GpuPlanInput& in, double gpu_bytes);

// The dry run's "per GPU" section. `gpu_source` says where gpu_bytes came from.
std::string gpu_plan_text(const GpuPlanInput& in, double gpu_bytes, const std::string& gpu_source);

// Why training would not fit in `device_bytes` of one GPU ("" if it fits, or when device_bytes is
// 0 = unknown): the parts per GPU and the knob; the caller prefixes the recipe's path and device.
std::string gpu_memory_shortfall(const GpuPlanInput& in, double device_bytes);

// The memory a dry run assumes of each GPU without a profile's gpu_memory_gib: an 80 GB H100.
constexpr double kDefaultGpuBytes = 80.0 * 1024 * 1024 * 1024;

}  // namespace nemotron::train
