// Model weights <-> safetensors, by Hub parameter name. Every checkpoint we write (training
// iterations, converted Hugging Face models) stores its weights this way, so any of them loads
// into a ParamStore of the same shape, and a mismatch names the tensor and both shapes.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "model/param.h"

namespace nemotron::model {

// Which parameters a save or load covers (empty: all of them). A LoRA checkpoint holds the
// adapters only; its base weights load from the pretrained checkpoint.
using ParamFilter = std::function<bool(const Param&)>;

// The store's tensors in registration order (values, not gradients).
std::vector<io::NamedTensor> named_weights(const ParamStore& store, const ParamFilter& only = {});

// dir/model.safetensors, or shards + model.safetensors.index.json beyond max_shard_bytes.
void save_weights(const std::string& dir, const ParamStore& store, size_t max_shard_bytes = size_t{4} << 30,
                  const ParamFilter& only = {});

// Where a load puts each parameter's tensor. By default the whole truth (Param::truth(): the
// float32 master of a bf16 value), then the value from it. An optimizer that shards the truth over
// ranks passes its own (train/shard_weight_sink.h) that takes only the rank's part, so a load
// never makes whole masters (or, under full parameter sharding, whole values) exist. The loaders
// know nothing of ranks: a sink says which local elements it takes and in which dtype.
class WeightSink {
 public:
  virtual ~WeightSink() = default;
  // The dtype p's elements are read in.
  virtual DType dtype(const Param& p) const { return p.truth().dtype(); }
  // The flat elements [begin, end) of p's local value (row-major) the sink takes; empty: none
  // (the tensor is still checked to exist with p's global shape).
  virtual std::pair<int64_t, int64_t> range(const Param& p) const { return {0, p.value.numel()}; }
  // `elements`: those elements, a 1-D host tensor in dtype(p).
  virtual void write(Param& p, const Tensor& elements) const {
    p.truth().copy_from(elements.view(p.truth().shape()));
    p.refresh_value();
  }
};

struct LoadReport {
  std::vector<std::string> unused;  // tensors in the checkpoint that the model does not have
};

// Fills every parameter of `store` from `set` (converting dtypes). A missing tensor or a shape
// mismatch is an InputError naming `source`, the tensor and both shapes. Tensors the model does
// not have are an error when strict, else listed in the report.
// Every tensor read is checked finite (a NaN weight is an InputError naming it, not a NaN loss
// blamed on the learning rate several steps later).
// With `only`, the other parameters are left as they are and their tensors count as unused.
// `sink` (null: the whole truth) receives what is read; the file's tensor is read whole, one at a
// time, and the sink's range of it passed on.
LoadReport load_weights(const io::SafetensorsSet& set, ParamStore& store, const std::string& source, bool strict = true,
                        const ParamFilter& only = {}, const WeightSink* sink = nullptr);

// InputError "<source>: tensor "<name>" [shape] holds non-finite values (...)" unless every value
// of the host tensor `host` is finite.
void check_loaded_finite(const Tensor& host, const std::string& source, const std::string& name);

}  // namespace nemotron::model
