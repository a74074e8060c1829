// A small pretraining config for the trainer and checkpoint tests: every block kind (Mamba-2,
// attention, MLP, MoE with a shared expert), WSD schedule, gradient accumulation, both MoE
// balancing methods, mock data. Small enough that a step takes milliseconds.
#pragma once
#include <string>
#include <vector>

#include "core/config_tree.h"
#include "train/train_config.h"

namespace nemotron::testing {

inline const char* kTinyTrainYaml = R"(
model:
  vocab_size: 64
  hidden_size: 32
  hybrid_override_pattern: "M*-E"
  max_position_embeddings: 64
  num_attention_heads: 4
  num_key_value_heads: 2
  head_dim: 8
  intermediate_size: 64
  mamba_num_heads: 4
  mamba_head_dim: 8
  n_groups: 1
  ssm_state_size: 8
  conv_kernel: 4
  chunk_size: 8
  n_routed_experts: 4
  num_experts_per_tok: 2
  moe_intermediate_size: 32
  moe_shared_expert_intermediate_size: 32
  n_shared_experts: 1
train:
  global_batch_size: 4
  micro_batch_size: 2
  train_iters: 6
  eval_interval: 3
  eval_iters: 1
optimizer:
  lr: 3.0e-3
  min_lr: 3.0e-4
  weight_decay: 0.1
  adam_beta2: 0.95
  clip_grad: 1.0
scheduler:
  lr_decay_style: WSD
  lr_wsd_decay_style: minus_sqrt
  lr_warmup_iters: 2
  lr_wsd_decay_iters: 3
dataset:
  seq_length: 16
  mock: true
moe:
  moe_router_enable_expert_bias: true
  moe_router_bias_update_rate: 0.01
  moe_router_load_balancing_type: seq_aux_loss
  moe_aux_loss_coeff: 0.01
)";

inline train::PretrainConfig tiny_train_config(const std::vector<std::string>& overrides = {}) {
  nlohmann::json tree = parse_yaml_text(kTinyTrainYaml, "tiny_train.yaml");
  apply_overrides(tree, overrides, "tiny_train.yaml");
  return train::read_pretrain_config(tree, "tiny_train.yaml");
}

}  // namespace nemotron::testing
