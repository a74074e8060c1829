// Sizes of a model from its config alone (nothing is allocated, so the real Nemotron 3 Super can be
// inspected on a laptop): per-layer parameter counts, totals, active parameters per token and
// FLOPs per token. Tensor shapes: reference/architectures.md A.1.2, A.3.1, A.5, A.6, A.7.1, A.8.2;
// model_info_test.cpp reproduces the exact published totals of A.10.
//
// Conventions. Parameters: embedding [V, H], lm_head [V, H] unless tied, per layer one norm [H]
// plus its mixer's tensors, final norm [H]. Active parameters per token: everything, except that
// an MoE layer counts K of its E routed experts. Forward FLOPs per token at sequence length T:
//   2 * (active matmul MACs per token, lm_head included, embedding lookup excluded)
//   + per attention layer 2 (QK^T and PV) * 2 FLOPs/MAC * nq * hd * (T + 1) / 2 (mean causal context)
// The Mamba conv, the SSM scan, norms, activations and the router's top-k are not counted (a few
// percent for the published shapes). Training FLOPs = 3 x forward (backward = 2 x forward).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_config.h"

namespace nemotron::model {

struct LayerInfo {
  int64_t index = 0;
  int64_t block = 0;  // the checkpoint's layer (DeciLM: attention and FFN sub-layers share one)
  LayerKind kind = LayerKind::mamba;
  int64_t params = 0;          // the layer's norm [H] + its mixer's tensors
  int64_t active_params = 0;   // per token (MoE: K of E routed experts)
  int64_t matmul_macs = 0;     // per token
  double attention_flops = 0;  // per token at the info's seq_len (attention layers only)
  double forward_flops = 0;    // 2 * matmul_macs + attention_flops
  std::vector<std::pair<std::string, int64_t>> dims;  // key dims in display order ("nH", 64), ...
};

struct ModelInfo {
  int64_t seq_len = 0;
  std::vector<LayerInfo> layers;
  int64_t embedding_params = 0, lm_head_params = 0, final_norm_params = 0, layer_params = 0;
  int64_t total_params = 0;   // with the MTP blocks (the published totals of A.10 count them)
  int64_t active_params = 0;  // per token through the trunk and head (what generation runs), without MTP
  int64_t mtp_params = 0;     // MTP blocks (A.8.2), included in total_params
  int64_t mtp_active_params = 0;  // per token of one MTP block (training runs it at each of D depths)
  double matmul_flops_per_token = 0, attention_flops_per_token = 0;
  double forward_flops_per_token = 0;      // trunk and head (generation)
  double mtp_forward_flops_per_token = 0;  // the D MTP depths (training only; each reruns the shared head)
  double training_flops_per_token = 0;     // 3 x (forward + MTP)
};

// Parameter count of one layer's mixer (without its norm), all of it or the part one token uses.
int64_t mixer_params(const ModelConfig& cfg, LayerKind kind);
int64_t mixer_active_params(const ModelConfig& cfg, LayerKind kind);
// Multiply-accumulates per token of the mixer's weight matmuls (biases, conv and vectors excluded).
int64_t mixer_matmul_macs(const ModelConfig& cfg, LayerKind kind);
// Parameters of the MTP blocks (num_nextn_predict_layers blocks of mtp_hybrid_override_pattern).
int64_t mtp_params(const ModelConfig& cfg);

// cfg must be valid (validate()); seq_len > 0.
ModelInfo model_info(const ModelConfig& cfg, int64_t seq_len);

// 31577940288 -> "31,577,940,288"; 3.158e10 -> "31.58 B" (K, M, B, T); 6.29e9 -> "6.29 GFLOP".
std::string format_count(int64_t n);
std::string human_count(double n);
std::string human_flops(double flops);

// What `nemotron model info` prints: a per-kind table, a compact per-layer table, totals, FLOPs.
std::string model_info_text(const ModelConfig& cfg, const ModelInfo& info, const std::string& source);
// The same as JSON (exact integers), for `model info --json`.
nlohmann::json model_info_json(const ModelConfig& cfg, const ModelInfo& info, const std::string& source);

}  // namespace nemotron::model
