// A model to run, not train: from a native checkpoint (a save directory with its tracker, or an
// iter_XXXXXXX directory; the model is its config.yaml's model: section) or a Hugging Face
// directory (config.json + safetensors), loaded onto the given backend in the given dtype with
// every parameter frozen (no gradient, no master). Eval, generate and serve read models this way.
#pragma once
#include <memory>
#include <string>

#include "core/backend.h"
#include "model/hybrid_model.h"

namespace nemotron::train {

struct InferenceModel {
  std::unique_ptr<model::HybridModel> net;
  std::string source;     // the directory the weights came from (the iteration directory, or the HF dir)
  std::string kind;       // "native" or "hf"
  int64_t iteration = 0;  // native checkpoints: the iteration; HF: 0
  // A tokenizer.json found beside the weights (the HF dir's, a checkpoint's tokenizer/), or "".
  std::string tokenizer_path;
};

// InputError naming `path` when it is neither kind, or the weights do not fit the config.
InferenceModel load_inference_model(const std::string& path, Backend& backend, DType dtype);

}  // namespace nemotron::train
