#include "engine/recompute_step_model.h"

#include "core/error.h"

namespace nemotron::engine {

RecomputeStepModel::RecomputeStepModel(model::HybridModel& model, Context ctx, int64_t max_slots, int64_t max_seq_len,
                                       int64_t max_total_tokens)
    : model_(model), ctx_(ctx), max_seq_len_(max_seq_len), max_total_tokens_(max_total_tokens) {
  NM_CHECK(max_slots > 0 && max_seq_len > 1, "RecomputeStepModel: max_slots {} and max_seq_len {}", max_slots,
           max_seq_len);
  seqs_.resize(static_cast<size_t>(max_slots));
}

int64_t RecomputeStepModel::vocab_size() const { return model_.config().vocab_size; }

bool RecomputeStepModel::can_admit(std::span<const int64_t> totals) const {
  int64_t held = 0;
  for (int64_t t : totals) {
    if (t > max_seq_len_) return false;
    held += t;
  }
  if (max_total_tokens_ <= 0) return true;
  for (const auto& s : seqs_) held += static_cast<int64_t>(s.size());
  return held <= max_total_tokens_;
}

std::vector<float> RecomputeStepModel::extend(const std::vector<int64_t>& slots,
                                              const std::vector<std::vector<int32_t>>& tokens) {
  NM_CHECK(slots.size() == tokens.size(), "extend: {} slots, {} token lists", slots.size(), tokens.size());
  const int64_t V = vocab_size();
  std::vector<float> out(slots.size() * static_cast<size_t>(V));
  for (size_t i = 0; i < slots.size(); ++i) {
    NM_CHECK(slots[i] >= 0 && slots[i] < max_slots(), "extend: slot {} of {}", slots[i], max_slots());
    NM_CHECK(!tokens[i].empty(), "extend: no tokens for slot {}", slots[i]);
    std::vector<int32_t>& seq = seqs_[static_cast<size_t>(slots[i])];
    seq.insert(seq.end(), tokens[i].begin(), tokens[i].end());
    NM_CHECK(static_cast<int64_t>(seq.size()) <= max_seq_len_, "extend: slot {} at {} tokens, max_seq_len {}",
             slots[i], seq.size(), max_seq_len_);
    const int64_t T = static_cast<int64_t>(seq.size());
    std::vector<int64_t> ids(seq.begin(), seq.end());
    for (int64_t id : ids) NM_CHECK(id >= 0 && id < V, "extend: token {} outside the vocabulary [0, {})", id, V);
    Tensor input = Tensor::from_vector<int64_t>({1, T}, ids).to(*ctx_.backend);
    Tensor logits = model_.logits(ctx_, input).to_host(DType::f32);  // [1, T, V]
    const float* last = logits.data<float>() + (T - 1) * V;
    std::copy(last, last + V, out.begin() + static_cast<std::ptrdiff_t>(i) * V);
  }
  return out;
}

void RecomputeStepModel::release(int64_t slot) {
  NM_CHECK(slot >= 0 && slot < max_slots(), "release: slot {} of {}", slot, max_slots());
  seqs_[static_cast<size_t>(slot)].clear();
}

void RecomputeStepModel::fork(const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  for (const auto& [from, to] : pairs) {
    NM_CHECK(from >= 0 && from < max_slots() && to >= 0 && to < max_slots(), "fork: slot {} or {} of {}", from, to,
             max_slots());
    NM_CHECK(seqs_[static_cast<size_t>(to)].empty(), "fork: slot {} holds a sequence", to);
    seqs_[static_cast<size_t>(to)] = seqs_[static_cast<size_t>(from)];
  }
}

}  // namespace nemotron::engine
