#include "train/inference_model.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
#include "model/hf_checkpoint.h"
#include "train/checkpoint.h"

namespace nemotron::train {

namespace fs = std::filesystem;

InferenceModel load_inference_model(const std::string& path, Backend& backend, DType dtype) {
  InferenceModel m;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(fmt::format("{}: no such checkpoint directory", path));
  if (fs::exists(fs::path(path) / "config.json", ec)) {
    const model::HfCheckpoint ck = model::HfCheckpoint::open(path);
    m.net = std::make_unique<model::HybridModel>(ck.config(), backend, dtype);
    ck.load_into(m.net->params());
    m.source = fs::absolute(path).lexically_normal().string();
    m.kind = "hf";
    if (fs::exists(fs::path(path) / "tokenizer.json", ec)) m.tokenizer_path = (fs::path(path) / "tokenizer.json").string();
  } else if (has_checkpoint(path)) {
    const std::string dir = resolve_checkpoint_dir(path);
    const fs::path config = fs::path(dir) / "config.yaml";
    if (!fs::exists(config, ec))
      throw InputError(fmt::format("{}: no config.yaml beside the weights: the model's shape is unknown", dir));
    m.net = std::make_unique<model::HybridModel>(model::load_model_config(config.string()), backend, dtype);
    load_checkpoint_weights(dir, m.net->params());
    m.source = fs::absolute(dir).lexically_normal().string();
    m.kind = "native";
    m.iteration = read_train_state(dir).iteration;
    for (const fs::path& p : {fs::path(dir) / "tokenizer" / "tokenizer.json", fs::path(dir).parent_path() / "tokenizer" / "tokenizer.json"})
      if (m.tokenizer_path.empty() && fs::exists(p, ec)) m.tokenizer_path = p.string();
  } else {
    throw InputError(fmt::format("{}: neither a native checkpoint (latest_checkpointed_iteration.txt or "
                                 "train_state.json) nor a Hugging Face directory (config.json)",
                                 path));
  }
  for (model::Param* p : m.net->params().all())
    if (p->requires_grad) m.net->params().set_requires_grad(*p, false);
  return m;
}

}  // namespace nemotron::train
