// What the generation cache of a server or a batch costs and how much of it fits: max_slots
// sequences of up to max_seq_len tokens, each holding its KV pages (whole blocks, attention
// layers) and its Mamba conv and SSM state, as CachedStepModel allocates them up front. On a GPU
// they may take kCacheMemoryFraction of the memory free once the weights are loaded; the rest is
// left to the steps' activations (a prefill of many prompts, the [S, V] logits). vLLM sizes its
// KV cache the same way from what is free after the weights (its --gpu-memory-utilization).
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "model/model_config.h"

namespace nemotron::engine {

constexpr double kCacheMemoryFraction = 0.9;

struct CacheBudget {
  int64_t per_slot_bytes = 0;  // one slot at max_seq_len: KV pages (whole blocks) + conv/SSM state
  int64_t total_bytes = 0;     // max_slots of them: what the cache allocates
  int64_t budget_bytes = 0;    // what it may take (0: unknown, e.g. the host)
  // Within budget_bytes (0 when unknown): the most slots at max_seq_len, and the longest
  // max_seq_len (whole blocks; -1: any, a model without attention) at max_slots.
  int64_t max_slots_that_fit = 0, max_seq_len_that_fits = 0;
  bool fits() const { return budget_bytes == 0 || total_bytes <= budget_bytes; }
};

// `available_bytes`: device memory free after the weights (Backend::available_bytes; 0 = unknown).
// `tensor_size`: the model is split over that many ranks (tensor parallelism), each holding 1/T of
// every KV head and Mamba head and group, so of every slot's state; the figures are one rank's.
CacheBudget cache_budget(const model::ModelConfig& cfg, DType dtype, int64_t max_slots, int64_t max_seq_len,
                         int64_t available_bytes, int64_t block_size, int64_t tensor_size = 1);

}  // namespace nemotron::engine
