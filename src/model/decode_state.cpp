#include "model/decode_state.h"

#include <algorithm>

#include "core/error.h"
#include "model/layer_spec.h"
#include "model/prefill_layout.h"
#include "ops/embedding.h"
#include "ops/kv_cache_decode.h"

namespace nemotron::model {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

Tensor upload(Backend& backend, Shape shape, const std::vector<int32_t>& v) {
  Tensor t = Tensor::from_vector<int32_t>(std::move(shape), v);
  return backend.device().is_cpu() ? t : t.to(backend);
}

}  // namespace

void copy_rows(Context& ctx, Tensor& t, const std::vector<int32_t>& from, const std::vector<int32_t>& to) {
  NM_CHECK(from.size() == to.size(), "copy_rows: {} sources, {} targets", from.size(), to.size());
  if (from.empty()) return;
  const int64_t R = static_cast<int64_t>(from.size()), rows = t.dim(0), W = t.numel() / rows;
  for (size_t i = 0; i < from.size(); ++i)
    NM_CHECK(to[i] >= 0 && to[i] < rows, "copy_rows: target row {} outside [0, {})", to[i], rows);
  // The embedding lookup is a row gather; the KV cache write a row scatter (block_size 1).
  Tensor picked = ctx.empty({R, W}, t.dtype());
  ops::embedding_forward(ctx, upload(*ctx.backend, {R}, from), t.view({rows, W}), picked);
  Tensor as_cache = t.view({rows, 1, 1, W});
  ops::kv_cache_write_decode(ctx, picked.view({R, 1, W}), upload(*ctx.backend, {R}, to), as_cache);
}

void DecodeConfig::validate(const std::string& where) const {
  auto positive = [&](const char* key, int64_t v) {
    if (v <= 0) throw InputError(fmt::format("{}.{}: expected a positive integer, got {}", where, key, v));
  };
  positive("max_slots", max_slots);
  positive("max_seq_len", max_seq_len);
  positive("block_size", block_size);
  if (num_blocks < 0) throw InputError(fmt::format("{}.num_blocks: expected 0 (automatic) or a positive count, got {}", where, num_blocks));
}

int64_t DecodeConfig::resolved_num_blocks() const {
  return num_blocks > 0 ? num_blocks : max_slots * ceil_div(max_seq_len, block_size);
}

DecodeState::DecodeState(const DecodeConfig& cfg, std::vector<std::unique_ptr<LayerDecodeState>> layers,
                         bool uses_kv_blocks)
    : cfg_(cfg), layers_(std::move(layers)), uses_kv_blocks_(uses_kv_blocks) {
  cfg_.validate();
  length_.assign(static_cast<size_t>(cfg_.max_slots), 0);
  table_.resize(static_cast<size_t>(cfg_.max_slots));
  if (uses_kv_blocks_) {
    const int64_t n = cfg_.resolved_num_blocks();
    refs_.assign(static_cast<size_t>(n), 0);
    // Lowest ids on top of the stack: a fresh state hands out blocks 0, 1, 2, ...
    for (int64_t b = n; b-- > 0;) free_.push_back(static_cast<int32_t>(b));
  }
}

DecodeState::DecodeState(DecodeState&&) noexcept = default;
DecodeState& DecodeState::operator=(DecodeState&&) noexcept = default;
DecodeState::~DecodeState() = default;

void DecodeState::check_slot(int64_t slot, const char* what) const {
  if (slot < 0 || slot >= cfg_.max_slots)
    throw Error(fmt::format("decode state: {}: slot {} outside 0..{}", what, slot, cfg_.max_slots - 1));
}

int64_t DecodeState::length(int64_t slot) const {
  check_slot(slot, "length");
  return length_[slot];
}

bool DecodeState::can_admit(int64_t total_tokens) const { return can_admit(std::span<const int64_t>(&total_tokens, 1)); }

bool DecodeState::can_admit(std::span<const int64_t> totals) const {
  int64_t blocks = 0;
  for (int64_t t : totals) {
    if (t <= 0 || t > cfg_.max_seq_len) return false;
    blocks += blocks_for(t);
  }
  return blocks <= free_blocks();
}

int64_t DecodeState::blocks_for(int64_t tokens) const {
  return uses_kv_blocks_ ? ceil_div(std::max<int64_t>(0, tokens), cfg_.block_size) : 0;
}

int64_t DecodeState::blocks_held(int64_t slot) const {
  check_slot(slot, "blocks_held");
  return static_cast<int64_t>(table_[slot].size());
}

void DecodeState::release(int64_t slot) {
  check_slot(slot, "release");
  for (auto& l : layers_)
    if (l) l->release(slot);
  // Push in reverse so the slot's first block is handed out first again; a block another slot
  // still shares (prefix sharing) stays with it.
  for (auto it = table_[slot].rbegin(); it != table_[slot].rend(); ++it)
    if (--refs_[*it] == 0) free_.push_back(*it);
  table_[slot].clear();
  length_[slot] = 0;
}

int64_t DecodeState::bytes() const {
  int64_t b = 0;
  for (const auto& l : layers_)
    if (l) b += l->bytes();
  return b;
}

int64_t DecodeState::bytes_per_sequence(const ModelConfig& cfg, int64_t seq_len, DType dtype) {
  const int64_t el = static_cast<int64_t>(dtype_size(dtype)), st = static_cast<int64_t>(dtype_size(stat_dtype(dtype)));
  int64_t b = 0;
  for (const LayerSpec& l : layer_specs(cfg)) {
    switch (l.kind) {
      case LayerKind::attention: b += 2 * seq_len * l.num_key_value_heads * cfg.attn_head_dim() * el; break;
      case LayerKind::mamba: {
        const int64_t d = cfg.mamba_num_heads * cfg.mamba_head_dim, conv_dim = d + 2 * cfg.n_groups * cfg.ssm_state_size;
        b += (cfg.conv_kernel - 1) * conv_dim * el + d * cfg.ssm_state_size * st;
        break;
      }
      default: break;
    }
  }
  return b;
}

namespace {

// The prompt-step arrays after the decode ones, in view_batch_tensors's order.
std::vector<const std::vector<int32_t>*> prompt_arrays(const DecodeBatch& b) {
  return {&b.host_seq_idx,    &b.host_scan_rows,       &b.host_scan_chunk_slots, &b.host_scan_init_slots,
          &b.host_scan_unpad, &b.host_decode_slot_ids, &b.host_decode_cu};
}

}  // namespace

int64_t batch_index_elements(const DecodeBatch& b) {
  const int64_t S = b.size();
  int64_t n = 3 * S + 1 + S * b.table_width + 2 * b.total_tokens;
  for (const auto* a : prompt_arrays(b)) n += static_cast<int64_t>(a->size());
  return n;
}

void view_batch_tensors(const Tensor& flat, DecodeBatch& b) {
  NM_CHECK(flat.dtype() == DType::i32 && flat.numel() == batch_index_elements(b),
           "decode batch: index buffer {} for {} elements", flat.describe(), batch_index_elements(b));
  const int64_t S = b.size(), N = b.total_tokens;
  int64_t at = 0;
  auto take = [&](Shape shape) {
    const int64_t n = shape.numel();
    Tensor t = flat.view({flat.numel()}).slice(at, at + n).view(std::move(shape));
    at += n;
    return t;
  };
  b.slot_ids = take({S});
  b.cu_seqlens = take({S + 1});
  b.context_lens = take({S});
  b.block_table = take({S, b.table_width});
  b.slot_mapping = take({N});
  b.position_ids = take({1, N});
  auto take_if = [&](const std::vector<int32_t>& host, bool row) {
    const int64_t n = static_cast<int64_t>(host.size());
    return n == 0 ? Tensor() : row ? take({1, n}) : take({n});
  };
  b.seq_idx = take_if(b.host_seq_idx, true);
  b.scan_rows = take_if(b.host_scan_rows, false);
  b.scan_chunk_slots = take_if(b.host_scan_chunk_slots, false);
  if (b.scan_chunk_slots.defined())  // [scan_seqs, chunks per row]
    b.scan_chunk_slots = b.scan_chunk_slots.view({b.scan_seqs, b.scan_chunk_slots.numel() / b.scan_seqs});
  b.scan_init_slots = take_if(b.host_scan_init_slots, false);
  b.scan_unpad = take_if(b.host_scan_unpad, false);
  b.decode_slot_ids = take_if(b.host_decode_slot_ids, false);
  b.decode_cu = take_if(b.host_decode_cu, false);
}

void upload_batch(Backend& backend, DecodeBatch& b) {
  std::vector<int32_t> all;
  all.reserve(static_cast<size_t>(batch_index_elements(b)));
  for (const auto* part : {&b.host_slot_ids, &b.cu, &b.host_context_lens, &b.host_block_table, &b.host_slot_mapping,
                           &b.host_positions})
    all.insert(all.end(), part->begin(), part->end());
  for (const auto* part : prompt_arrays(b)) all.insert(all.end(), part->begin(), part->end());
  view_batch_tensors(upload(backend, {static_cast<int64_t>(all.size())}, all), b);
}

DecodeBatch DecodeState::begin(Backend& backend, const std::vector<int64_t>& slots,
                               const std::vector<int64_t>& new_tokens) {
  DecodeBatch b = begin_host(slots, new_tokens);
  upload_batch(backend, b);
  return b;
}

DecodeBatch DecodeState::begin_host(const std::vector<int64_t>& slots, const std::vector<int64_t>& new_tokens) {
  if (slots.empty()) throw Error("decode state: extend needs at least one slot");
  if (slots.size() != new_tokens.size())
    throw Error(fmt::format("decode state: {} slots but {} token lists", slots.size(), new_tokens.size()));
  std::vector<char> seen(static_cast<size_t>(cfg_.max_slots), 0);
  for (size_t i = 0; i < slots.size(); ++i) {
    check_slot(slots[i], "extend");
    if (seen[slots[i]]) throw Error(fmt::format("decode state: slot {} appears twice in one extend call", slots[i]));
    seen[slots[i]] = 1;
    if (new_tokens[i] <= 0) throw Error(fmt::format("decode state: slot {}: no tokens to append", slots[i]));
    if (length_[slots[i]] + new_tokens[i] > cfg_.max_seq_len)
      throw Error(fmt::format("decode state: slot {}: {} + {} tokens exceed max_seq_len {}", slots[i], length_[slots[i]],
                              new_tokens[i], cfg_.max_seq_len));
  }
  const int64_t bs = cfg_.block_size;
  if (uses_kv_blocks_) {
    int64_t need = 0;
    for (size_t i = 0; i < slots.size(); ++i)
      need += ceil_div(length_[slots[i]] + new_tokens[i], bs) - static_cast<int64_t>(table_[slots[i]].size());
    if (need > free_blocks())
      throw Error(fmt::format("decode state: the call needs {} more KV blocks, {} are free (check can_admit before "
                              "admitting a sequence)", need, free_blocks()));
    for (size_t i = 0; i < slots.size(); ++i) {
      auto& t = table_[slots[i]];
      while (static_cast<int64_t>(t.size()) < ceil_div(length_[slots[i]] + new_tokens[i], bs)) {
        t.push_back(free_.back());
        refs_[free_.back()] = 1;
        free_.pop_back();
      }
    }
  }
  DecodeBatch b;
  b.slots = slots;
  b.new_tokens = new_tokens;
  b.cu.push_back(0);
  auto& slot_ids = b.host_slot_ids;
  auto& ctx_lens = b.host_context_lens;
  auto& mapping = b.host_slot_mapping;
  auto& positions = b.host_positions;
  int64_t M = 1;
  for (size_t i = 0; i < slots.size(); ++i) {
    const int64_t s = slots[i], L = length_[s];
    b.start.push_back(L);
    b.cu.push_back(static_cast<int32_t>(b.cu.back() + new_tokens[i]));
    slot_ids.push_back(static_cast<int32_t>(s));
    ctx_lens.push_back(static_cast<int32_t>(L + new_tokens[i]));
    M = std::max<int64_t>(M, static_cast<int64_t>(table_[s].size()));
    for (int64_t p = L; p < L + new_tokens[i]; ++p) {
      positions.push_back(static_cast<int32_t>(p));
      mapping.push_back(uses_kv_blocks_ ? static_cast<int32_t>(table_[s][p / bs] * bs + p % bs) : 0);
    }
  }
  b.total_tokens = b.cu.back();
  b.table_width = M;
  std::vector<int32_t>& table = b.host_block_table;
  table.assign(slots.size() * static_cast<size_t>(M), 0);
  for (size_t i = 0; i < slots.size(); ++i) std::copy(table_[slots[i]].begin(), table_[slots[i]].end(), table.begin() + i * M);
  plan_prefill(b, cfg_.scan_chunk);
  return b;
}

void DecodeState::fork(Context& ctx, const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  if (pairs.empty()) return;
  const int64_t bs = cfg_.block_size;
  std::vector<char> used(static_cast<size_t>(cfg_.max_slots), 0);
  int64_t copies = 0;
  for (const auto& [from, to] : pairs) {
    check_slot(from, "fork");
    check_slot(to, "fork");
    if (length_[from] == 0) throw Error(fmt::format("decode state: fork from slot {}, which holds no sequence", from));
    if (length_[to] != 0 || !table_[to].empty())
      throw Error(fmt::format("decode state: fork onto slot {}, which holds a sequence (release it first)", to));
    if (used[to]) throw Error(fmt::format("decode state: slot {} is forked onto twice", to));
    used[to] = 1;
    if (uses_kv_blocks_ && length_[from] % bs != 0) ++copies;
  }
  if (copies > free_blocks())
    throw Error(fmt::format("decode state: forking needs {} free KV blocks, {} are free", copies, free_blocks()));
  ForkPlan plan;
  for (const auto& [from, to] : pairs) {
    plan.from_slots.push_back(static_cast<int32_t>(from));
    plan.to_slots.push_back(static_cast<int32_t>(to));
    const int64_t L = length_[from];
    if (uses_kv_blocks_) {
      auto& t = table_[to];
      for (int64_t b = 0; b < L / bs; ++b) {
        t.push_back(table_[from][b]);
        ++refs_[t.back()];
      }
      if (L % bs != 0) {  // the last block is still written to: each slot gets its own
        plan.from_blocks.push_back(table_[from][L / bs]);
        plan.to_blocks.push_back(free_.back());
        t.push_back(free_.back());
        refs_[free_.back()] = 1;
        free_.pop_back();
      }
    }
    length_[to] = L;
  }
  for (auto& l : layers_)
    if (l) l->fork(ctx, plan);
}

void DecodeState::commit(const DecodeBatch& batch) {
  for (int64_t i = 0; i < batch.size(); ++i) length_[batch.slots[i]] += batch.new_tokens[i];
}

}  // namespace nemotron::model
