#include "model/prefill_layout.h"

#include <algorithm>

#include "core/error.h"
#include "model/decode_state.h"

namespace nemotron::model {

namespace {

int64_t round_up(int64_t n, int64_t q) { return (n + q - 1) / q * q; }

// Padding tokens for chunk q: every sequence but the last rounded up to a multiple of q.
int64_t padding(const std::vector<int64_t>& lengths, int64_t q) {
  int64_t pad = 0;
  for (size_t i = 0; i + 1 < lengths.size(); ++i) pad += round_up(lengths[i], q) - lengths[i];
  return pad;
}

}  // namespace

int64_t prefill_scan_chunk(const std::vector<int64_t>& lengths, int64_t chunk_size) {
  NM_CHECK(chunk_size >= 1, "prefill layout: chunk size {}", chunk_size);
  int64_t total = 0;
  for (int64_t n : lengths) total += n;
  int64_t q = chunk_size;
  while (q / 2 >= kPrefillMinChunk && 4 * padding(lengths, q) > total) q /= 2;
  return q;
}

void plan_whole_prompts(DecodeBatch& b, int64_t scan_chunk) {
  const int64_t S = b.size(), N = b.total_tokens;
  const bool whole = std::all_of(b.start.begin(), b.start.end(), [](int64_t s) { return s == 0; });
  if (!whole || N == S) return;
  b.host_seq_idx.resize(static_cast<size_t>(N));
  for (int64_t i = 0; i < S; ++i)
    std::fill(b.host_seq_idx.begin() + b.cu[i], b.host_seq_idx.begin() + b.cu[i + 1], static_cast<int32_t>(i));
  if (scan_chunk <= 0) return;

  const int64_t Q = prefill_scan_chunk(b.new_tokens, scan_chunk);
  b.scan_chunk = Q;
  b.host_scan_unpad.resize(static_cast<size_t>(N));
  auto& rows = b.host_scan_rows;
  auto& seq = b.host_scan_seq_idx;
  for (int64_t i = 0; i < S; ++i) {
    const int64_t len = b.new_tokens[i], padded = i + 1 < S ? round_up(len, Q) : len;
    for (int64_t t = 0; t < padded; ++t) {
      if (t < len) b.host_scan_unpad[b.cu[i] + t] = static_cast<int32_t>(rows.size());
      rows.push_back(static_cast<int32_t>(t < len ? b.cu[i] + t : N));  // N: the zero row
      seq.push_back(static_cast<int32_t>(i));
    }
  }
  b.scan_tokens = static_cast<int64_t>(rows.size());
  // Chunk c of the padded row ends at token min(Tp, (c+1) Q) - 1: the slot of the sequence that
  // ends there, if one does (every sequence does, by the padding).
  const int64_t nc = (b.scan_tokens + Q - 1) / Q;
  b.host_scan_chunk_slots.assign(static_cast<size_t>(nc), -1);
  for (int64_t i = 0, end = 0; i < S; ++i) {
    end += i + 1 < S ? round_up(b.new_tokens[i], Q) : b.new_tokens[i];
    b.host_scan_chunk_slots[(end - 1) / Q] = b.host_slot_ids[i];
  }
}

}  // namespace nemotron::model
