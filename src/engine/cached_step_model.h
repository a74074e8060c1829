// The StepModel the engine runs on: HybridModel::extend over a DecodeState (model/decode_state.h):
// a paged KV cache for attention layers, the conv window and SSM state for Mamba layers, so each
// step computes only the new tokens. Its logits equal RecomputeStepModel's (the exact reference)
// to rounding (tests/engine/cached_step_model_test.cpp). The KV pool holds every slot's full
// max_seq_len (num_blocks = max_slots * ceil(max_seq_len / block_size)): a running sequence can
// never run out of blocks, whatever it was admitted with, since the engine does not yet reserve a
// sequence's growth; paging then still lets blocks go back the moment a sequence finishes.
// On a GPU the weights, cache and states stay on the device: each step uploads the new tokens and
// the batch's index tensors and brings back only the [S, V] logits of the slots' last tokens
// (bf16 as the head wrote them, for a bf16 model; widened on the host), one sync per step; or,
// for steps the engine samples on the device (greedy or temperature-only rows), only the drawn
// tokens and their log-probs. Those decode steps (one token per sequence) run as CUDA graphs
// (engine/decode_graphs.h) unless turned off: the state then holds one more slot and KV block,
// the padded rows' scratch, which the engine never sees.
#pragma once
#include <memory>
#include <vector>

#include "core/context.h"
#include "engine/step_model.h"
#include "model/decode_state.h"
#include "model/hybrid_model.h"
#if NEMOTRON_CUDA
#include "engine/decode_graphs.h"
#endif

namespace nemotron::engine {

// Whether CachedStepModels made from now on run their GPU decode steps as CUDA graphs (on by
// default; the CLI turns it off once at start for NEMOTRON_DECODE_GRAPHS=0, the benchmarks with
// --decode-graphs off). No effect on the CPU or under expert parallelism.
void set_decode_graphs_default(bool on);
bool decode_graphs_default();

class CachedStepModel : public StepModel {
 public:
  static constexpr int64_t kBlockSize = 16;  // tokens per KV page
  // `ctx` runs the model (its backend is where the weights and the cache live).
  CachedStepModel(model::HybridModel& model, Context ctx, int64_t max_slots, int64_t max_seq_len,
                  int64_t block_size = kBlockSize);

  int64_t vocab_size() const override { return model_.config().vocab_size; }
  ~CachedStepModel() override;
  int64_t max_slots() const override { return max_slots_; }
  int64_t max_seq_len() const override { return state_.max_seq_len(); }
  bool can_admit(std::span<const int64_t> totals) const override { return state_.can_admit(totals); }
  std::vector<float> extend(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens) override;
  // On a GPU: the tokens are drawn there (ops::sample_rows), S tokens and log-probs come back.
  bool samples_on_device() const override { return !ctx_.backend->device().is_cpu(); }
  std::vector<ops::TokenDraw> extend_and_sample(const std::vector<int64_t>& slots,
                                                const std::vector<std::vector<int32_t>>& tokens,
                                                std::span<const ops::RowSampling> rows,
                                                std::span<const int64_t> logits_rows = {}) override;
  // A decode step that replays a graph is launched without waiting for it (the engine's host
  // work for the previous step overlaps it); any other step runs whole in launch_and_sample.
  void launch_and_sample(const std::vector<int64_t>& slots, const std::vector<std::vector<int32_t>>& tokens,
                         std::span<const ops::RowSampling> rows, std::span<const int64_t> logits_rows = {}) override;
  std::vector<ops::TokenDraw> collect_draws() override;
  void release(int64_t slot) override { state_.release(slot); }
  // model::DecodeState::fork: full KV blocks shared, the partial last block and the Mamba states
  // copied on the model's device.
  bool can_fork() const override { return true; }
  void fork(const std::vector<std::pair<int64_t, int64_t>>& pairs) override { state_.fork(ctx_, pairs); }
  // Expert parallelism (ctx's expert group larger than one): the members' engines step together
  // (one host all-reduce a step), and a member with nothing to decode extends a one-token
  // sequence in a slot of its own beyond max_slots(), released at once, so that its MoE layers
  // still exchange (and compute) the other members' tokens. No decode graphs then (the
  // exchange's counts come to the host).
  bool group_has_work(bool mine) override;
  void idle_step() override;

  // Decode steps run by a CUDA graph replay so far (0 without graphs).
  int64_t graph_replays() const;
  // Whether decode steps go through CUDA graphs now (false on the CPU, when turned off, or after
  // a step failed to capture).
  bool uses_decode_graphs() const;

  const model::DecodeState& state() const { return state_; }
  model::DecodeState& state() { return state_; }  // for benchmarks driving HybridModel::extend directly

 private:
  model::HybridModel& model_;
  Context ctx_;
  int64_t max_slots_;  // the engine's; the state holds one more with graphs or expert parallelism
  model::DecodeState state_;
  // Whether a step replays a decode graph (one token per slot, a draw per row, graphs on).
  bool graph_step(std::span<const int64_t> logits_rows, const std::vector<std::vector<int32_t>>& tokens) const;
  std::vector<ops::TokenDraw> eager_extend_and_sample(const std::vector<int64_t>& slots,
                                                      const std::vector<std::vector<int32_t>>& tokens,
                                                      std::span<const ops::RowSampling> rows,
                                                      std::span<const int64_t> logits_rows);
  std::vector<ops::TokenDraw> launched_;  // the draws of a step launch_and_sample ran whole
#if NEMOTRON_CUDA
  std::unique_ptr<DecodeGraphs> graphs_;
#endif
};

}  // namespace nemotron::engine
