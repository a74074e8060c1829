// The training loop's configuration, shared by every stage that trains (pretraining, SFT, RL):
// Megatron-Bridge's train:, optimizer:, scheduler:, checkpoint:, logger: and moe: sections, the
// rng seed and the device keys (reference/pipeline-and-rl.md §6.1). A stage's config derives
// from TrainLoopConfig and adds its own sections (model:, dataset:, ...); its reader calls
// read_train_loop_config for the shared keys, so every stage accepts them with the same names,
// defaults and error messages.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/config_tree.h"
#include "train/lr_schedule.h"

namespace nemotron::train {

// Rewrites a stage's config tree after the overrides, before it is read (`source` names the file
// in errors): how cli resolves ${art:...} references without train knowing the artifact store.
using ConfigTreeHook = std::function<void(nlohmann::json& tree, const std::string& source)>;

struct TrainSection {             // train:
  int64_t global_batch_size = 0;  // sequences per optimizer step
  int64_t micro_batch_size = 1;   // sequences per forward/backward; GBS / MBS micro-batches per step
  int64_t train_iters = 0;
  int64_t eval_interval = 0;  // 0 = no periodic validation (also accepted under validation:)
  int64_t eval_iters = 0;     // validation steps of global_batch_size sequences each
  int64_t exit_interval = 0;  // 0 = never; else stop (after saving) when iteration % it == 0
  // Not a key: the run's data-parallel ranks (set_data_parallel_size). Each runs GBS / (MBS x DP)
  // micro-batches per step, as in Megatron.
  int64_t data_parallel_size = 1;
  int64_t accumulation_steps() const { return global_batch_size / (micro_batch_size * data_parallel_size); }
};

struct OptimizerSection {  // optimizer: (Megatron names and defaults)
  std::string optimizer = "adam";
  double lr = 0, min_lr = 0;
  double weight_decay = 0.01;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_eps = 1e-8;
  double clip_grad = 1.0;  // 0 = no clipping
};

struct SchedulerSection {  // scheduler:
  LrDecayStyle lr_decay_style = LrDecayStyle::linear;
  WsdDecayStyle lr_wsd_decay_style = WsdDecayStyle::exponential;
  int64_t lr_warmup_iters = 0;
  double lr_warmup_fraction = -1;  // unset
  double lr_warmup_init = 0;
  int64_t lr_decay_iters = 0;      // 0 = train_iters
  int64_t lr_wsd_decay_iters = 0;  // 0 = lr_decay_iters
};

struct CheckpointSection {     // checkpoint:
  std::string save;            // parent directory of iter_XXXXXXX/; empty = never save
  int64_t save_interval = 0;   // 0 = only at the end (and at exit_interval); nothing without save
  std::string load;            // parent (tracker) or iter_XXXXXXX directory; empty = start fresh
  bool finetune = false;       // load weights only; iteration, optimizer and data start over
  // Megatron-Bridge's key: weights to start from when `load` holds no checkpoint (yet): loaded
  // weights only, as finetune (SFT starts from the pretrained model; a rerun with load = save
  // resumes its own checkpoints instead).
  std::string pretrained_checkpoint;
  int64_t most_recent_k = -1;  // keep the k newest iterations; -1 = all
};

struct LoggerSection {       // logger:
  int64_t log_interval = 1;  // a progress line every N iterations (metrics: every iteration)
  std::string metrics_path;  // JSONL; empty = <checkpoint.save>/metrics.jsonl, or none without save
  // TensorBoard event files (Megatron-Bridge's key). Absent = <checkpoint.save>/tb_logs (the
  // layout of Megatron-Bridge's recipes: <run>/tb_logs beside the checkpoints), none without save;
  // `logger.tensorboard_dir: null` (or "", or false) turns them off.
  std::string tensorboard_dir;
  bool tensorboard = true;
};

struct MoeSection {                            // moe: router load balancing (reference/architectures.md A.7.4)
  bool moe_router_enable_expert_bias = false;  // aux-loss-free balancing by the bias update
  double moe_router_bias_update_rate = 1e-3;
  std::string moe_router_load_balancing_type = "none";  // "none" or "seq_aux_loss"
  double moe_aux_loss_coeff = 0.0;
  bool seq_aux_loss() const { return moe_router_load_balancing_type == "seq_aux_loss"; }
};

struct DdpSection {  // ddp: (Megatron-Bridge's DistributedDataParallelConfig)
  // The distributed optimizer (ZeRO-1, train/adamw.h): with a data group of D > 1, gradients
  // reduce-scattered and float32 masters + Adam moments sharded 1/D per rank. False (Megatron-
  // Bridge's default): every rank all-reduces and holds the whole state. No effect on one rank.
  bool use_distributed_optimizer = false;
  // Elements per gradient bucket (Megatron's bucket_size): each is all-reduced, or with the
  // distributed optimizer reduce-scattered, as soon as the last backward finished it
  // (train/grad_buckets.h). Smaller: more overlap, more and smaller collectives.
  int64_t bucket_size = 40'000'000;
  // Megatron FSDP (use_megatron_fsdp) and what it shards over the data group
  // (data_parallel_sharding_strategy): no_shard (plain data parallelism), optim (the distributed
  // optimizer above), optim_grads (and the float32 gradients 1/D per rank: each layer's
  // accumulate in one of two layer slots and are reduce-scattered into the rank's slice as every
  // micro-batch's backward finishes the layer, train/grad_slots.h), optim_grads_params (and full
  // parameter sharding: the compute-dtype weights 1/D per rank between layers, each layer gathered
  // before its forward and its backward, train/param_gather.h). The strategy needs
  // use_megatron_fsdp=true.
  enum class Sharding { no_shard, optim, optim_grads, optim_grads_params };
  bool use_megatron_fsdp = false;
  Sharding data_parallel_sharding_strategy = Sharding::no_shard;
  // The optimizer state is sharded (use_distributed_optimizer, or FSDP's optim and above).
  bool shards_optimizer() const {
    return use_distributed_optimizer || (use_megatron_fsdp && data_parallel_sharding_strategy != Sharding::no_shard);
  }
  bool shards_params() const { return use_megatron_fsdp && data_parallel_sharding_strategy == Sharding::optim_grads_params; }
  bool shards_grads() const {
    return use_megatron_fsdp && (data_parallel_sharding_strategy == Sharding::optim_grads ||
                                 data_parallel_sharding_strategy == Sharding::optim_grads_params);
  }
};

struct TrainLoopConfig {
  std::string source;   // the file it came from (prefixes errors)
  nlohmann::json tree;  // the resolved tree (file + overrides), saved as config.yaml
  TrainSection train;
  OptimizerSection optimizer;
  SchedulerSection scheduler;
  CheckpointSection checkpoint;
  LoggerSection logger;
  MoeSection moe;
  DdpSection ddp;
  uint64_t seed = 1234;  // rng.seed: the model's initial weights (and the stage's own streams)
  // Where and in what precision to train (top-level keys). device: cpu (default), cuda, cuda:N.
  // mixed_precision: Megatron-Bridge's key; bf16_mixed (the default on CUDA: bf16 weights and
  // activations, float32 master weights, gradients and optimizer state) or fp32 (the CPU's only).
  std::string device = "cpu";
  std::string mixed_precision;  // as resolved: "bf16_mixed" or "fp32"
  // Set by the stage's reader from its data section: tokens per sequence (dataset.seq_length, an
  // SFT pack size) and the seed of the data streams (both recorded in logs and checkpoints), and
  // the word the loop's log lines open with.
  int64_t seq_length = 0;
  uint64_t data_seed = 0;
  std::string stage_name = "pretraining";

  bool on_cuda() const { return device.rfind("cuda", 0) == 0; }
  int cuda_index() const;
  LrSchedule lr_schedule() const;
  int64_t tokens_per_step() const { return train.global_batch_size * seq_length; }
};

// Reads and validates the shared sections (train:, validation:, optimizer:, scheduler:,
// checkpoint:, logger:, rng:, moe:, ddp:, device, mixed_precision) of `root` into c. Other sections are
// the stage's to read; root.check_unknown_keys() is the caller's, after them.
void read_train_loop_config(ConfigReader& root, TrainLoopConfig& c);
// The run's data-parallel size (from its rank layout); an InputError naming train.global_batch_size
// when the global batch does not split into whole micro-batches per rank.
void set_data_parallel_size(TrainLoopConfig& c, int64_t data_parallel_size);
// Just device: (cpu, cuda, cuda:N) and mixed_precision: (bf16_mixed, the default on CUDA, or fp32)
// of `root`, validated: for stages whose config is not a TrainLoopConfig (rl).
void read_device_keys(ConfigReader& root, std::string& device, std::string& mixed_precision);
// N of a checked "cuda:N" device ("cuda": 0).
int cuda_device_index(const std::string& device);

// The tree as YAML text (what config.yaml and --dry-run show).
std::string config_to_yaml(const nlohmann::json& tree);

}  // namespace nemotron::train
