// Sharded gradients (Megatron FSDP's optim_grads and optim_grads_params; ZeRO-2's gradients):
// no rank holds the whole float32 gradient buffer. Each trunk layer's gradients accumulate into one
// of two layer slots (layer i in slot i % 2, each the size of the largest layer; the units of
// train/layer_units.h), and as the backward finishes a layer (Context::on_layer_backward) its
// slot is reduce-scattered over the data group and the rank's slice ADDED into
// AdamW::shard_grads(), which so accumulates the step's micro-batches (Megatron FSDP also
// reduce-scatters every micro-batch); the slot is zeroed for layer i - 2 once that reduce-scatter
// has landed, just before layer i - 1's backward, so one layer's reduce-scatter runs during the
// next layer's backward (NCCL's communication stream; synchronous on the CPU, the same code).
// The outer unit (embedding, final norm, head, MTP blocks) keeps whole gradients, reduce-scattered
// and added at the end of each micro-batch (a choice, as for its values in param_gather.h). The
// store's flat buffer is never allocated (the optimizer's layout comes from shapes, and a store
// built with defer_grads never held whole per-parameter gradients either): the clipping norm,
// the update and the checkpoint read the slices only (AdamW's sharded path).
#pragma once
#include <array>
#include <functional>

#include "core/context.h"
#include "model/hybrid_model.h"
#include "parallel/communicator.h"
#include "train/adamw.h"
#include "train/layer_units.h"

namespace nemotron::train {

class GradSlots {
 public:
  // `opt` shards gradients (AdamW::shards_grads) over `group`; net, opt, group and ctx (the
  // step's: where the slices are added) outlive this. Points every sharded parameter's gradient
  // at its slot or the outer buffer (the optimizer left them without storage: the whole buffer
  // never exists).
  GradSlots(model::HybridModel& net, AdamW& opt, parallel::Communicator& group, Context& ctx);
  GradSlots(const GradSlots&) = delete;
  GradSlots& operator=(const GradSlots&) = delete;

  // Before a step's first micro-batch: the slices, the slots and the outer gradients zeroed.
  void begin_step();
  // For each micro-batch's backward: the trunk's layer hook.
  const std::function<void(int64_t layer)>* layer_hook() { return &hook_; }
  // After each micro-batch's backward: the last layers' and the outer unit's slices added, the
  // slots and outer gradients zeroed for the next micro-batch.
  void finish_micro_batch();
  // Called right after each wait for the group's pending collectives between two layers (full
  // parameter sharding: ParamGather::pending_waited, its prefetched gather being done too).
  void set_after_wait(std::function<void()> f) { after_wait_ = std::move(f); }

  int64_t slice_bytes() const;      // the rank's slices (AdamW::shard_grads())
  int64_t buffer_bytes() const;     // the two layer slots, the outer unit and the receive buffers
  int64_t layer_bytes() const;      // one slot
  int64_t whole_bytes() const;      // the gradients one process holds (without the padding)
  int64_t reduce_scatters() const { return scatters_; }  // layer reduce-scatters in the last step

 private:
  void after_layer(int64_t layer);
  void land(size_t slot);  // the slot's reduce-scatter waited for, its slice added, the slot zeroed
  AdamW& opt_;
  parallel::Communicator& group_;
  Context& ctx_;
  LayerUnits units_;
  std::array<Tensor, 2> slot_buf_, recv_;  // recv_: a slot's slice, reduce-scattered
  Tensor outer_, outer_recv_;
  std::array<int64_t, 2> pending_{-1, -1};  // by slot: the layer whose reduce-scatter is in flight
  int64_t scatters_ = 0, micro_scatters_ = 0, trunk_buckets_ = 0;
  std::function<void(int64_t)> hook_;
  std::function<void()> after_wait_;
};

}  // namespace nemotron::train
