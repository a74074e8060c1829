// Full parameter sharding's weights (Megatron FSDP's optim_grads_params; ZeRO-3's parameters):
// each rank of the data group keeps only its slices of the compute-dtype values
// (AdamW::value_shard(): the distributed optimizer's layout with one bucket per trunk layer), and
// the parameters' value tensors are views into buffers that hold whole weights only while needed:
//  - the trunk's layers share two slot buffers (layer i in slot i % 2, each the size of the
//    largest layer): a layer's weights are all-gathered into its slot just before its forward
//    and again just before its backward, unless the slot still holds them (the last two layers at
//    the turn from forward to backward, the first two at the next micro-batch's forward). While a
//    layer computes, the gather of the next one (i + 1 in the forward, i - 1 in the backward) runs
//    on the group's communication stream (Megatron's overlap_param_gather; synchronous on the CPU,
//    where the same code runs). Gathering again for the backward rather than keeping every layer
//    is the choice that bounds the weights to two layers whatever the depth.
//  - the rest (embedding, final norm, head, MTP blocks) is one unit gathered once after every
//    update and kept whole through the step: both ends of the step read it (a choice: it holds the
//    vocabulary-sized embedding and head; sharding them between their uses is left).
// The model sees whole tensors and knows nothing of this: the gathers run from the trunk's layer
// observer (LayerStack::set_before_layer). Parameters outside the optimizer's flat buffer (frozen
// ones, expert-parallel experts) keep their own whole values. Gradients: sharded too
// (train/grad_slots.h), each layer's reduce-scattered as every micro-batch's backward finishes it.
#pragma once
#include <array>
#include <vector>

#include "model/hybrid_model.h"
#include "parallel/communicator.h"
#include "train/adamw.h"
#include "train/layer_units.h"

namespace nemotron::train {

class ParamGather {
 public:
  // `opt` shards values (AdamW::shards_values) over `group`; net, opt and group outlive this.
  // Replaces every sharded parameter's value by its view in the buffers (the whole values are
  // freed) and gathers the outer unit; sets net's trunk observer (cleared by the destructor).
  ParamGather(model::HybridModel& net, AdamW& opt, parallel::Communicator& group);
  ~ParamGather();
  ParamGather(const ParamGather&) = delete;
  ParamGather& operator=(const ParamGather&) = delete;

  // After the update wrote the value shard: the outer unit gathered again, the slots stale.
  void refresh();
  // The group's pending collectives were waited for by someone else (the gradient slots, between
  // two layers' backward): no gather is in flight, so the next layer does not wait again (which
  // would also wait for the reduce-scatter queued since, serialising it with that layer).
  void pending_waited() {
    for (Slot& s : slot_) s.in_flight = false;
  }
  // Collective: every sharded parameter gets a whole value of its own again (what a checkpoint
  // load wrote into before train/shard_weight_sink.h, which writes the value shard and calls
  // refresh(); tests compare against it); reshard() takes the rank's slices of them and goes back
  // to the buffers.
  void unshard();
  void reshard();
  // Collective: `to`, a store of the same model at the same shard (parameters in the same order,
  // e.g. GRPO's generation-engine copy or its reference policy), receives every value whole: each
  // trunk layer gathered into its slot in turn (the next one prefetched, as in a forward) and
  // copied out, the outer unit and the parameters outside the buffers copied as they are. Peak
  // memory beyond `to`: none (the slots are reused). Returns the bytes of whole layer units the
  // all-gathers wrote on this rank (the outer unit is whole since the last update).
  int64_t copy_whole_to(model::ParamStore& to);

  int64_t shard_bytes() const;     // the rank's slices of the values
  int64_t buffer_bytes() const;    // the outer unit + the two layer slots
  int64_t sharded_bytes() const;   // the whole values of the sharded parameters (one process's)
  int64_t layer_bytes() const;     // one slot: the largest layer
  int64_t gathers() const { return gathers_; }        // layer gathers since construction
  int64_t prefetched() const { return prefetched_; }  // of which queued ahead, during another layer

 private:
  struct Slot {
    int64_t layer = -1;  // whose weights it holds (-1: none or stale)
    bool in_flight = false;
  };
  void before_layer(int64_t layer, bool backward);
  void gather(int64_t layer, bool async);
  void point_values();
  Tensor dest(size_t bucket) const;  // where bucket `bucket`'s whole values live
  model::HybridModel& net_;
  AdamW& opt_;
  parallel::Communicator& group_;
  LayerUnits units_;
  Tensor outer_;
  std::array<Tensor, 2> slot_buf_;
  std::array<Slot, 2> slot_;
  int64_t gathers_ = 0, prefetched_ = 0, gathered_bytes_ = 0;
  model::LayerStack::LayerObserver observer_;
};

}  // namespace nemotron::train
