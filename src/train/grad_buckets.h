// The flat gradient buffer (ParamStore::make_grads_contiguous) cut into buckets, Megatron's
// param_and_grad_buffer buckets: contiguous ranges of the buffer in the order the backward
// completes them (from its end: the head and MTP first, the embedding last), each closed at a
// parameter's start once it holds bucket_elements or more, so a parameter lies in one bucket.
// The data-parallel reduction runs per bucket (GradReducer), and the distributed optimizer shards
// every bucket over the data group (AdamW): cut only at parameter starts that are multiples of
// 64 D (the buffer's end is one), each bucket is a multiple of 64 D, and rank r owns the r-th of
// its D equal slices, so each bucket can be reduce-scattered the moment the backward finished it,
// and a parameter's part of a rank's slices is one contiguous piece. (Megatron pads each bucket
// instead; the store's buffer has no gaps to pad with, and real models' parameters are multiples
// of 64 D elements, so nearly every start qualifies.)
#pragma once
#include <cstdint>
#include <vector>

#include "model/param.h"

namespace nemotron::train {

constexpr int64_t kDefaultGradBucketElements = 40'000'000;  // Megatron's ddp.bucket_size

struct GradBucket {
  int64_t begin = 0, end = 0;  // elements of the flat buffer
  // Sharded (AdamW::shard_buckets()): where this rank's slice of (end - begin) / D elements,
  // [begin + rank (end - begin) / D, ...) of the buffer, lives in AdamW::shard_grads().
  int64_t shard_at = 0;
};

// The buckets of `params`' gradient buffer (made), in the backward's order; they cover the buffer
// once, its padding included, and start at parameter starts that are multiples of `cut_multiple`
// (the buffer's length must be one). `by_layer` (full parameter sharding's units): instead of
// bucket_elements, a cut wherever the trunk layer (model::Param::trunk_layer) changes, so each trunk layer's
// parameters are one bucket of their own (where its start is a multiple of cut_multiple).
std::vector<GradBucket> grad_buckets(const model::ParamStore& params, int64_t bucket_elements,
                                     int64_t cut_multiple = 1, bool by_layer = false);
// The same cut over a layout computed from shapes (ParamStore::grad_layout), for a buffer that
// is never allocated whole (sharded gradients).
std::vector<GradBucket> grad_buckets(const model::ParamStore& params, const model::GradLayout& layout,
                                     int64_t bucket_elements, int64_t cut_multiple = 1, bool by_layer = false);

// Element offset of parameter p's gradient in the store's buffer (p.grad must be in it).
int64_t grad_offset(const model::ParamStore& params, const model::Param& p);

}  // namespace nemotron::train
