#include "engine/cache_budget.h"

#include <algorithm>

#include "model/decode_state.h"

namespace nemotron::engine {

namespace {
int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
}  // namespace

CacheBudget cache_budget(const model::ModelConfig& cfg, DType dtype, int64_t max_slots, int64_t max_seq_len,
                         int64_t available_bytes, int64_t block_size, int64_t tensor_size) {
  // One rank's share of a slot of `len` tokens (the layout divides every split size: exact).
  auto slot_bytes = [&](int64_t len) { return model::DecodeState::bytes_per_sequence(cfg, len, dtype) / tensor_size; };
  CacheBudget b;
  b.per_slot_bytes = slot_bytes(round_up(max_seq_len, block_size));
  b.total_bytes = max_slots * b.per_slot_bytes;
  if (available_bytes <= 0) return b;
  b.budget_bytes = static_cast<int64_t>(kCacheMemoryFraction * static_cast<double>(available_bytes));
  b.max_slots_that_fit = b.per_slot_bytes > 0 ? b.budget_bytes / b.per_slot_bytes : 0;
  // A slot's bytes are linear in its length: the Mamba state (fixed) plus KV per block.
  const int64_t fixed = slot_bytes(0);
  const int64_t per_block = slot_bytes(block_size) - fixed;
  const int64_t per_slot_budget = b.budget_bytes / std::max<int64_t>(max_slots, 1);
  if (per_block == 0) b.max_seq_len_that_fits = fixed <= per_slot_budget ? -1 : 0;
  else b.max_seq_len_that_fits = per_slot_budget > fixed ? (per_slot_budget - fixed) / per_block * block_size : 0;
  return b;
}

}  // namespace nemotron::engine
