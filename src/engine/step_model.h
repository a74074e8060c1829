// What the generation engine drives: a model holding per-slot sequence state. The engine owns
// scheduling and sampling; a StepModel only turns appended tokens into next-token logits. Two
// implementations: RecomputeStepModel (exact, recomputes each sequence from scratch) and the
// cached model (HybridModel::extend over a DecodeState), which is checked against it.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ops/sample_rows.h"

namespace nemotron::engine {

class StepModel {
 public:
  virtual ~StepModel() = default;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_slots() const = 0;
  virtual int64_t max_seq_len() const = 0;
  // Whether memory (KV blocks) is free for new sequences of up to totals[i] tokens each, all of
  // them together (the engine asks for the requests of one admission pass at once: their blocks
  // are taken only at the next extend).
  virtual bool can_admit(std::span<const int64_t> totals) const = 0;
  // Appends tokens[i] to slot slots[i] (a slot at length 0 starts a sequence; prefill = many
  // tokens, decode = one each) and returns float32 logits [S * V] at each slot's last appended
  // token, row i for slots[i].
  virtual std::vector<float> extend(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens) = 0;
  // Whether extend_and_sample draws where the logits are (a GPU): the engine then asks it for the
  // steps whose every row is greedy or temperature-only, and gets S tokens back instead of S x V
  // logits.
  virtual bool samples_on_device() const { return false; }
  // extend(), then draw i under rows[i] (ops::sample_rows) from the logits of slot
  // slots[logits_rows[i]] (empty logits_rows: of slots[i], one draw per slot), where they are.
  // Several draws from one row serve prefix sharing (the G generations of a prompt prefilled
  // once). Only called when samples_on_device().
  virtual std::vector<ops::TokenDraw> extend_and_sample(const std::vector<int64_t>& slots,
                                                        const std::vector<std::vector<int32_t>>& tokens,
                                                        std::span<const ops::RowSampling> rows,
                                                        std::span<const int64_t> logits_rows = {}) {
    (void)slots, (void)tokens, (void)rows, (void)logits_rows;
    throw Error("extend_and_sample: this step model samples on the host only");
  }
  // extend_and_sample in two halves, for a caller with host work to overlap with the step
  // (EngineOptions::async_scheduling): launch_and_sample queues the step and may return before it
  // is done; collect_draws waits for it and returns its draws. One step in flight at a time, and
  // nothing else is asked of the model in between. Default: the whole step in launch_and_sample.
  virtual void launch_and_sample(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
                                 std::span<const ops::RowSampling> rows, std::span<const int64_t> logits_rows = {}) {
    launched_ = extend_and_sample(slots, tokens, rows, logits_rows);
  }
  virtual std::vector<ops::TokenDraw> collect_draws() { return std::move(launched_); }
  // Frees the slot; its next extend starts a new sequence.
  virtual void release(int64_t slot) = 0;
  // Prefix sharing: whether fork() is offered. The engine then prefills a prompt that several
  // queued requests share once and forks the others' slots from it.
  virtual bool can_fork() const { return false; }
  // Each empty slot pairs[i].second continues slot pairs[i].first's sequence as the last extend
  // left it: its next extend appends after the same tokens, with the same logits to rounding.
  virtual void fork(const std::vector<std::pair<int64_t, int64_t>>& pairs) {
    (void)pairs;
    throw Error("fork: this step model does not share prefixes");
  }
  // Lockstep for a model whose forward is collective over other processes' engines (expert
  // parallelism: every MoE layer exchanges tokens with the whole expert group, so every member
  // must step as often as the busiest one). Called once per engine step by every member with
  // whether this engine has work; returns whether any member has. A model on its own: `mine`.
  virtual bool group_has_work(bool mine) { return mine; }
  // A step for a member with no work of its own while others have: takes part in the collective
  // forward without touching any slot's sequence.
  virtual void idle_step() {}

 private:
  std::vector<ops::TokenDraw> launched_;  // the default launch_and_sample's draws
};

}  // namespace nemotron::engine
