// Where a checkpoint load puts the weights under the distributed optimizer and Megatron FSDP
// (train/adamw.h), so that no rank makes the whole float32 masters exist for a load, nor, under
// full parameter sharding (optim_grads_params), the whole values: a parameter of the optimizer's
// flat buffer takes only the rank's piece of its master (read in float32), and its compute-dtype
// value whole where every rank holds it whole (optim, optim_grads), or only the rank's slice of it
// in the value shard (optim_grads_params: only that range is read; ParamGather::refresh() then
// gathers what is held whole). The rest (frozen parameters, expert-parallel experts, any
// parameter of an optimizer that does not shard) loads whole, as model::WeightSink does.
#pragma once
#include <map>
#include <utility>

#include "model/weights_io.h"
#include "train/adamw.h"

namespace nemotron::train {

class ShardWeightSink final : public model::WeightSink {
 public:
  // `opt` is the optimizer of `params`; both outlive the sink.
  ShardWeightSink(const AdamW& opt, const model::ParamStore& params);
  DType dtype(const model::Param& p) const override;
  std::pair<int64_t, int64_t> range(const model::Param& p) const override;
  void write(model::Param& p, const Tensor& elements) const override;

 private:
  // p's index in the store when the optimizer shards its truth, -1 otherwise.
  int64_t sharded_index(const model::Param& p) const;
  const AdamW& opt_;
  std::map<const model::Param*, size_t> index_;
};

}  // namespace nemotron::train
