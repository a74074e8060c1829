// The RL stage's configuration (`nemotron <family> rl`; recipes/<family>/rl/*.yaml): NeMo RL's GRPO
// sections with their key names (grpo:, loss_fn:, policy:, checkpointing:; rl/grpo_config.h), plus
// what one native process needs besides them:
//   model:                      the policy's shape (the SFT model's; checked against its checkpoint)
//   policy.model_name           the checkpoint to start from (NeMo RL's key: there a Hugging Face
//                               name; here a checkpoint directory, e.g. the SFT stage's save dir)
//   policy.tokenizer.name       tokenizer.json; policy.tokenizer.chat_template: nano3 | nemotron-h | nano-v2,
//                               a .jinja file / tokenizer_config.json / directory, auto or checkpoint
//                               (the policy checkpoint's own; auto: else nano3), as sft and serve take
//   policy.optimizer            AdamW: lr, weight_decay, betas [b1, b2], eps; lr_warmup_iters and
//                               lr_warmup_init (Megatron's names: linear warmup, then constant, as
//                               Nemotron's RL recipes schedule it); lr_decay_style (constant | linear |
//                               cosine), lr_decay_iters (default grpo.max_num_steps) and min_lr, as
//                               NeMo RL's megatron_cfg.scheduler / optimizer name them
//   data.train_jsonl_fpath, data.validation_jsonl_fpath   NeMo Gym rows (`data prep rl` output);
//                               data.shuffle (default true: a seeded shuffle per epoch)
//   env.name                    the environment (rl/env/environment.h); its options beside it
//   env.max_unscored_fraction   the share of a step's (or a validation's) rows the environment
//                               may fail to score before the run stops with an error (0.05)
//   policy.generation.vllm_cfg.tensor_parallel_size, .expert_parallel_size   the generator's
//                               tensor- and expert-parallel sizes (the trainer's by default; others
//                               get a resharded copy, rl/grpo_trainer.h)
//   device, mixed_precision     as for the other stages (train/train_loop_config.h): cpu (fp32), or
//                               cuda / cuda:N with bf16_mixed (the default there: bf16 weights the
//                               engine and the trainer share, fp32 masters and moments) or fp32
//   policy.megatron_cfg.optimizer.use_distributed_optimizer, policy.megatron_cfg.
//   distributed_data_parallel_config.{use_custom_fsdp | use_megatron_fsdp, data_parallel_sharding_strategy}
//                               the distributed optimizer and Megatron FSDP over the data ranks
// Unknown keys are errors naming the file and the dotted key.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "model/model_config.h"
#include "rl/env/environment.h"
#include "rl/grpo_config.h"
#include "train/adamw.h"
#include "train/lr_schedule.h"

namespace nemotron::rl {

struct RlOptimizerSection {  // policy.optimizer:
  double lr = 5e-6;
  double weight_decay = 0.01;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t lr_warmup_iters = 0;
  double lr_warmup_init = 0.0;
  // policy.megatron_cfg.optimizer.use_distributed_optimizer (NeMo RL's Megatron backend key):
  // the float32 masters and Adam moments sharded over the data-parallel ranks (ZeRO-1,
  // train/adamw.h); the bf16 weights stay whole on every rank, so the engine decodes from them as
  // without it.
  bool distributed = false;
  // policy.megatron_cfg.distributed_data_parallel_config.use_custom_fsdp (NeMo RL's name; or
  // use_megatron_fsdp, newer Megatron's) with its data_parallel_sharding_strategy: Megatron FSDP as
  // pretraining runs it (train/adamw.h). optim is the distributed optimizer above; optim_grads
  // shards the float32 gradients too (Fsdp::grads); optim_grads_params the compute-dtype weights
  // as well (Fsdp::grads_params): the trainer gathers each layer where it runs, and before each
  // step's rollouts (and each validation) the engine's whole copy is gathered layer by layer and
  // freed after them (rl/grpo_trainer.h). Data parallelism only (tensor, expert and context
  // parallelism are refused, as in pretraining); off on one data rank.
  train::Fsdp fsdp = train::Fsdp::off;
  std::string fsdp_key;  // the flag that turned it on (for the start-up line), "" when off
  train::LrDecayStyle lr_decay_style = train::LrDecayStyle::constant;
  int64_t lr_decay_iters = 0;  // as read: grpo.max_num_steps when absent
  double min_lr = 0.0;
  // The rate of optimizer step `step` (1-based): linear from lr_warmup_init to lr over the warmup,
  // then constant, or down to min_lr at step lr_decay_iters (Megatron's schedule counted in steps).
  double lr_at(int64_t step) const;
};

struct RlDataSection {  // data:
  std::string train_jsonl_fpath, validation_jsonl_fpath;
  bool shuffle = true;
};

struct RlConfig {
  std::string source;   // the recipe file (prefixes errors)
  nlohmann::json tree;  // the resolved tree, saved as config.yaml
  model::ModelConfig model;
  GrpoConfig grpo;
  std::string model_name;      // policy.model_name: the starting checkpoint
  std::string tokenizer_path;  // policy.tokenizer.name
  std::string chat_template = "nano3";  // the spec; resolve_rl_chat_template loads it
  RlOptimizerSection optimizer;
  RlDataSection data;
  std::string env_name = "math";
  std::shared_ptr<env::Environment> environment;  // built (and its options checked) on load
  // Past this share of unscored rows in one step or validation, the run stops with an error
  // before training on them (nothing of that step is trained, saved or published). 0.05, not 0:
  // unscored rows are left out of the loss and the baselines, so an occasional verification that
  // outlives its retries (a judge timing out once in a thousand rows) costs a little signal, not
  // correctness, and need not kill a long run; a server that is down, erroring or answering
  // garbage fails nearly every row and stops the run at its first step. 0 allows none; 1 never stops.
  double max_unscored_fraction = 0.05;
  // policy.generation.vllm_cfg.tensor_parallel_size: the generator's tensor-parallel size (the
  // trainer's, model.tensor_model_parallel_size, unless set otherwise).
  int64_t generator_tensor_parallel = 1;
  // policy.generation.vllm_cfg.expert_parallel_size: the generator's expert-parallel size, over
  // its data ranks as the trainer's is (the trainer's model.expert_model_parallel_size by default).
  int64_t generator_expert_parallel = 1;
  std::string device = "cpu";
  std::string mixed_precision = "fp32";  // as resolved: "bf16_mixed" (CUDA's default) or "fp32"
};

// Reads and validates a resolved tree (run: and recipe: are ignored).
RlConfig read_rl_config(const nlohmann::json& tree, const std::string& source);

// policy.tokenizer.chat_template loaded: a built-in, a template file, or (auto, checkpoint) the one
// policy.model_name holds. InputError "<source>: policy.tokenizer.chat_template: ..." otherwise.
data::ChatTemplate resolve_rl_chat_template(const RlConfig& c, const std::string& source);
// Loads the YAML file, applies the dotted key=value overrides, runs `resolve` (cli's ${art:...}),
// reads and validates.
using RlTreeHook = std::function<void(nlohmann::json& tree, const std::string& source)>;
RlConfig load_rl_config(const std::string& path, const std::vector<std::string>& overrides,
                        const RlTreeHook& resolve = {});

// What `rl --dry-run` prints: the resolved config, the model's size, the rollout plan, the
// engine's KV + SSM state per sequence and in all at policy.max_total_sequence_length.
std::string rl_dry_run_text(const RlConfig& cfg, const std::string& recipe, size_t overrides);

}  // namespace nemotron::rl
