#include "train/shard_weight_sink.h"

#include "core/error.h"

namespace nemotron::train {

ShardWeightSink::ShardWeightSink(const AdamW& opt, const model::ParamStore& params) : opt_(opt) {
  const auto& all = params.all();
  for (size_t k = 0; k < all.size(); ++k) index_[all[k]] = k;
}

int64_t ShardWeightSink::sharded_index(const model::Param& p) const {
  if (!opt_.shards_truth()) return -1;
  const auto it = index_.find(&p);
  NM_CHECK(it != index_.end(), "ShardWeightSink: {} is not a parameter of the optimizer's store", p.name);
  return opt_.buffer_offset(it->second) >= 0 ? static_cast<int64_t>(it->second) : -1;
}

DType ShardWeightSink::dtype(const model::Param& p) const {
  if (sharded_index(p) < 0) return WeightSink::dtype(p);
  return opt_.shards_masters() ? DType::f32 : p.value.dtype();
}

std::pair<int64_t, int64_t> ShardWeightSink::range(const model::Param& p) const {
  const int64_t k = sharded_index(p);
  if (k < 0 || !opt_.shards_values()) return WeightSink::range(p);  // the value is whole on every rank
  return opt_.state_range(static_cast<size_t>(k));
}

void ShardWeightSink::write(model::Param& p, const Tensor& elements) const {
  const int64_t k = sharded_index(p);
  if (k < 0) return WeightSink::write(p, elements);
  const size_t i = static_cast<size_t>(k);
  if (opt_.shards_values()) {  // `elements` is the rank's range
    opt_.truth_piece(i).copy_from(elements);
    if (opt_.shards_masters()) opt_.value_piece(i).copy_from(elements.to_host(p.value.dtype()));
    return;
  }
  // The whole value from the float32 elements, as Param::refresh_value() would from a whole master.
  p.value.copy_from(elements.to_host(p.value.dtype()).view(p.value.shape()));
  const auto [begin, end] = opt_.state_range(i);
  if (opt_.shards_masters() && begin < end) opt_.master_piece(i).copy_from(elements.slice(begin, end));
}

}  // namespace nemotron::train
