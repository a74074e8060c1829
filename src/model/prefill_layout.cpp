#include "model/prefill_layout.h"

#include <algorithm>

#include "core/error.h"
#include "model/decode_state.h"

namespace nemotron::model {

void plan_prefill(DecodeBatch& b, int64_t scan_chunk) {
  const int64_t S = b.size(), N = b.total_tokens;
  if (N == S) return;  // a decode step
  const bool whole = std::all_of(b.start.begin(), b.start.end(), [](int64_t s) { return s == 0; });
  if (whole) {
    b.host_seq_idx.resize(static_cast<size_t>(N));
    for (int64_t i = 0; i < S; ++i)
      std::fill(b.host_seq_idx.begin() + b.cu[i], b.host_seq_idx.begin() + b.cu[i + 1], static_cast<int32_t>(i));
  }
  if (scan_chunk <= 0) return;

  std::vector<int64_t> prompts, singles;  // sequence indices
  int64_t len = 0;
  bool continuing = false;
  for (int64_t i = 0; i < S; ++i) {
    if (b.new_tokens[i] > 1) {
      prompts.push_back(i);
      len = std::max(len, b.new_tokens[i]);
      continuing = continuing || b.start[i] > 0;
    } else {
      singles.push_back(i);
    }
  }
  const int64_t R = static_cast<int64_t>(prompts.size()), Sd = static_cast<int64_t>(singles.size());
  NM_CHECK(R > 0, "prefill layout: a step of {} tokens over {} sequences without a prompt", N, S);
  b.scan_chunk = scan_chunk;
  b.scan_seqs = R;
  b.scan_len = len;
  b.scan_tokens = R * len;
  const int64_t nc = (len + scan_chunk - 1) / scan_chunk;
  b.host_scan_chunk_slots.assign(static_cast<size_t>(R * nc), -1);
  for (int64_t r = 0; r < R; ++r) b.host_scan_chunk_slots[r * nc + nc - 1] = b.host_slot_ids[prompts[r]];
  if (continuing)
    for (int64_t i : prompts) b.host_scan_init_slots.push_back(b.host_slot_ids[i]);
  if (Sd == 0 && b.scan_tokens == N) return;  // equal prompts only: the rows are the tokens as they are

  // Row r * len + t takes token cu[i] + t of prompt r (N, outside every table: a zero row, dt = 0,
  // past its end); then the single tokens, in order. unpad: each token's row.
  b.host_scan_unpad.resize(static_cast<size_t>(N));
  auto& rows = b.host_scan_rows;
  rows.reserve(static_cast<size_t>(b.scan_tokens + Sd));
  for (int64_t i : prompts)
    for (int64_t t = 0; t < len; ++t) {
      const bool real = t < b.new_tokens[i];
      if (real) b.host_scan_unpad[b.cu[i] + t] = static_cast<int32_t>(rows.size());
      rows.push_back(static_cast<int32_t>(real ? b.cu[i] + t : N));
    }
  if (Sd == 0) return;
  b.host_decode_cu.push_back(0);
  for (int64_t i : singles) {
    b.host_scan_unpad[b.cu[i]] = static_cast<int32_t>(rows.size());
    rows.push_back(b.cu[i]);
    b.host_decode_slot_ids.push_back(b.host_slot_ids[i]);
    b.host_decode_cu.push_back(static_cast<int32_t>(b.host_decode_cu.size()));
  }
}

}  // namespace nemotron::model
