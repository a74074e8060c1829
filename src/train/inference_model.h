// A model to run, not train: from a native checkpoint (a save directory with its tracker, an
// iter_XXXXXXX directory, or a weights-only directory such as a `convert import` output; the
// model is its config.yaml's model: section) or a Hugging Face directory (config.json +
// safetensors), loaded onto the given backend in the given dtype with every parameter frozen (no
// gradient, no master). Eval, generate and serve read models this way.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "model/hybrid_model.h"
#include "train/compute_device.h"

namespace nemotron::train {

struct InferenceModel {
  std::unique_ptr<model::HybridModel> net;
  std::string source;     // the directory the weights came from (the iteration directory, or the HF dir)
  std::string kind;       // "native" or "hf"
  int64_t iteration = 0;  // native checkpoints with a train_state.json: the iteration; else 0
  // A tokenizer.json found beside the weights (the HF dir's, a checkpoint's tokenizer/ or its
  // save directory's tokenizer/), or "".
  std::string tokenizer_path;
  // One line per thing worth telling the user: legacy names read, tensors not used (MTP heads).
  std::vector<std::string> notes;
};

// InputError naming `path` when it is neither kind, or the weights do not fit the config.
// `shard_of` (optional) is asked, with the checkpoint's model config, which part of the model this
// rank builds (tensor parallelism: generate and serve under a launcher); each parameter then loads
// its part of the whole tensor.
using ShardOf = std::function<model::ModelShard(const model::ModelConfig&)>;
// "" when the weights `shard` holds fit `have` bytes of device memory (or `have` is 0: the host),
// else one line naming `path`, the GiB needed and free, and the tensor size that fits (checked
// against the model's heads and widths), as load_inference_model refuses the load with.
std::string weights_shortfall(const std::string& path, const model::ModelConfig& cfg, const model::ModelShard& shard,
                              DType dtype, double have);
InferenceModel load_inference_model(const std::string& path, Backend& backend, DType dtype,
                                    const ShardOf& shard_of = {});

// The backend a model runs on, from a --device value: "cpu", "cuda", "cuda:N", or "auto" (the
// first GPU when this build has CUDA and the machine shows one, else the CPU); "cuda" and "auto"
// take GPU `gpu` instead of the first (a launcher's local rank). The returned
// dtype is the device's default for inference (bf16 on CUDA, float32 on the CPU). InputError
// naming `where` for a value of another form, or a device this build or machine lacks.
ComputeDevice open_inference_device(const std::string& device, const std::string& where, int gpu = 0);

// A --dtype value on that device: "auto" is the device's default (bf16 on CUDA, float32 on the
// CPU); the CPU runs float32 or float64, CUDA float32 or bfloat16. InputError naming `where`
// otherwise.
DType inference_dtype(const std::string& name, const ComputeDevice& dev, const std::string& where);

}  // namespace nemotron::train
