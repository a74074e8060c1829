// The exact reference StepModel: keeps each slot's tokens and recomputes the whole sequence with
// HybridModel::logits on every extend (O(T^2) per sequence, slow, exact). Each slot runs alone as
// a [1, T] batch, so a slot's logits never depend on what else is in the batch: batched and
// one-at-a-time generation give bit-identical results, and a cached model is checked against it.
#pragma once
#include <vector>

#include "core/context.h"
#include "engine/step_model.h"
#include "model/hybrid_model.h"

namespace nemotron::engine {

class RecomputeStepModel : public StepModel {
 public:
  // `max_total_tokens` (> 0) bounds the tokens held over all slots, standing in for a KV block
  // pool so a scheduler's refusal path can be exercised; 0 = no bound.
  RecomputeStepModel(model::HybridModel& model, Context ctx, int64_t max_slots, int64_t max_seq_len,
                     int64_t max_total_tokens = 0);

  int64_t vocab_size() const override;
  int64_t max_slots() const override { return static_cast<int64_t>(seqs_.size()); }
  int64_t max_seq_len() const override { return max_seq_len_; }
  bool can_admit(std::span<const int64_t> totals) const override;
  std::vector<float> extend(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens) override;
  void release(int64_t slot) override;
  // Copies the token history (each slot is recomputed alone, so a fork is exact by construction).
  bool can_fork() const override { return true; }
  void fork(const std::vector<std::pair<int64_t, int64_t>>& pairs) override;

  int64_t length(int64_t slot) const { return static_cast<int64_t>(seqs_.at(static_cast<size_t>(slot)).size()); }

 private:
  model::HybridModel& model_;
  Context ctx_;
  int64_t max_seq_len_, max_total_tokens_;
  std::vector<std::vector<int32_t>> seqs_;
};

}  // namespace nemotron::engine
