// The pretraining stage's configuration: a recipe YAML (recipes/<family>/pretrain/*.yaml) with
// Megatron-Bridge section and key names (reference/pipeline-and-rl.md §6.1) read into typed
// structs. Every key is read through ConfigReader, so a key nobody reads is an error suggesting
// the nearest valid one, a wrong type names the key, the expected type and the value, and
// validate() names the dotted key (and both sides of a conflict).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "train/lr_schedule.h"

namespace nemotron::train {

struct TrainSection {             // train:
  int64_t global_batch_size = 0;  // sequences per optimizer step
  int64_t micro_batch_size = 1;   // sequences per forward/backward; GBS / MBS micro-batches per step
  int64_t train_iters = 0;
  int64_t eval_interval = 0;  // 0 = no periodic validation (also accepted under validation:)
  int64_t eval_iters = 0;     // validation steps of global_batch_size sequences each
  int64_t exit_interval = 0;  // 0 = never; else stop (after saving) when iteration % it == 0
  int64_t accumulation_steps() const { return global_batch_size / micro_batch_size; }
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
  int64_t most_recent_k = -1;  // keep the k newest iterations; -1 = all
};

struct LoggerSection {       // logger:
  int64_t log_interval = 1;  // a progress line every N iterations (metrics: every iteration)
  std::string metrics_path;  // JSONL; empty = <checkpoint.save>/metrics.jsonl, or none without save
};

struct DatasetSection {  // dataset: (alias data:)
  int64_t seq_length = 0;
  bool mock = false;     // true: synthetic tokens, whatever blend / per_split_data_args_path say
  nlohmann::json blend;  // Megatron's [w1, prefix1, w2, prefix2, ...] or prefixes, as given
  bool has_blend() const { return !blend.is_null(); }
  std::string per_split_data_args_path;  // blend.json with train/valid/test blends (not wired yet)
  std::string split;                     // "969,30,1" style, for dataset.blend (unset: 969,30,1)
  uint64_t random_seed = 1234;           // seed of the data streams (mock tokens, sample order)
};

struct MoeSection {                            // moe: router load balancing (reference/architectures.md A.7.4)
  bool moe_router_enable_expert_bias = false;  // aux-loss-free balancing by the bias update
  double moe_router_bias_update_rate = 1e-3;
  std::string moe_router_load_balancing_type = "none";  // "none" or "seq_aux_loss"
  double moe_aux_loss_coeff = 0.0;
  bool seq_aux_loss() const { return moe_router_load_balancing_type == "seq_aux_loss"; }
};

struct PretrainConfig {
  std::string source;   // the file it came from (prefixes errors)
  nlohmann::json tree;  // the resolved tree (file + overrides), saved as config.yaml
  model::ModelConfig model;
  TrainSection train;
  OptimizerSection optimizer;
  SchedulerSection scheduler;
  CheckpointSection checkpoint;
  LoggerSection logger;
  DatasetSection dataset;
  MoeSection moe;
  uint64_t seed = 1234;  // rng.seed: the model's initial weights
  // Where and in what precision to train (top-level keys). device: cpu (default), cuda, cuda:N.
  // mixed_precision: Megatron-Bridge's key; bf16_mixed (the default on CUDA: bf16 weights and
  // activations, float32 master weights, gradients and optimizer state) or fp32 (the CPU's only).
  std::string device = "cpu";
  std::string mixed_precision;  // as resolved: "bf16_mixed" or "fp32"
  bool on_cuda() const { return device.rfind("cuda", 0) == 0; }
  int cuda_index() const;

  LrSchedule lr_schedule() const;
  int64_t tokens_per_step() const { return train.global_batch_size * dataset.seq_length; }
};

// Reads and validates a resolved tree. Unknown keys anywhere are errors; `run:` and `recipe:`
// (launcher sections of the Python stack) are accepted and ignored.
PretrainConfig read_pretrain_config(const nlohmann::json& tree, const std::string& source);
// Loads the YAML file, applies the dotted key=value overrides, reads and validates.
PretrainConfig load_pretrain_config(const std::string& path, const std::vector<std::string>& overrides);
// The tree as YAML text (what config.yaml and --dry-run show).
std::string config_to_yaml(const nlohmann::json& tree);

}  // namespace nemotron::train
