// Megatron FSDP's units over the sharded optimizer's layout (AdamW built with by-layer buckets:
// grad_buckets' by_layer): each trunk layer's parameters are one bucket, a unit that exists whole
// only while that layer computes, in one of two slots (layer i in slot i % 2, each the size of the
// largest layer); the rest (embedding, final norm, head, MTP blocks) is one "outer" unit kept
// whole, its buckets packed one after another. Full parameter sharding keeps the compute-dtype
// values this way (train/param_gather.h), gradient sharding the float32 gradients
// (train/grad_slots.h): the same map, two buffers.
#pragma once
#include <array>
#include <vector>

#include "model/param.h"
#include "train/adamw.h"

namespace nemotron::train {

struct LayerUnits {
  std::vector<int64_t> layer_of;   // by bucket: its trunk layer, -1 for the outer unit
  std::vector<int64_t> bucket_of;  // by trunk layer: its bucket (-1: none)
  std::vector<int64_t> outer_at;   // by bucket: its offset in the outer unit (-1: a layer's)
  std::vector<std::vector<size_t>> params_of;  // by bucket: the store indices of its parameters
  int64_t slot_elements = 0;    // the largest layer's bucket
  int64_t outer_elements = 0;   // the outer unit's buckets together
  int64_t param_elements = 0;   // of the parameters in the buckets (without the padding)

  // Where bucket b's whole elements live: slot[layer % 2]'s first ones, or its place in `outer`.
  Tensor where(const std::vector<GradBucket>& buckets, size_t b, const std::array<Tensor, 2>& slots,
               const Tensor& outer) const;
  // Parameter k's elements inside `bucket_view` (what where() returned for its bucket), in `shape`
  // (its value's).
  Tensor param_view(const AdamW& opt, const Shape& shape, size_t k, size_t b, const Tensor& bucket_view) const;
};

// The units of `opt`'s buckets (sharded, cut by layer) over the store it was built on; a bucket
// with parameters of two layers is an internal error (a layer start not at a multiple of 64 D).
LayerUnits layer_units(const model::ParamStore& params, const AdamW& opt, int64_t num_layers);

}  // namespace nemotron::train
