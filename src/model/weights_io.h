// Model weights <-> safetensors, by Hub parameter name. Every checkpoint we write (training
// iterations, converted Hugging Face models) stores its weights this way, so any of them loads
// into a ParamStore of the same shape, and a mismatch names the tensor and both shapes.
#pragma once
#include <functional>
#include <string>
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

struct LoadReport {
  std::vector<std::string> unused;  // tensors in the checkpoint that the model does not have
};

// Fills every parameter of `store` from `set` (converting dtypes). A missing tensor or a shape
// mismatch is an InputError naming `source`, the tensor and both shapes. Tensors the model does
// not have are an error when strict, else listed in the report.
// Every tensor read is checked finite (a NaN weight is an InputError naming it, not a NaN loss
// blamed on the learning rate several steps later).
// With `only`, the other parameters are left as they are and their tensors count as unused.
LoadReport load_weights(const io::SafetensorsSet& set, ParamStore& store, const std::string& source, bool strict = true,
                        const ParamFilter& only = {});

// InputError "<source>: tensor "<name>" [shape] holds non-finite values (...)" unless every value
// of the host tensor `host` is finite.
void check_loaded_finite(const Tensor& host, const std::string& source, const std::string& name);

}  // namespace nemotron::model
