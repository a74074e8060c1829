#include "train/inference_model.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/config_tree.h"
#include "core/error.h"
#include "model/hf_checkpoint.h"
#include "model/shard_sizes.h"
#include "parallel/rank_layout.h"
#include "train/checkpoint.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace nemotron::train {

namespace fs = std::filesystem;

namespace {

bool has_weights(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / "model.safetensors", ec) ||
         fs::exists(fs::path(dir) / "model.safetensors.index.json", ec);
}

}  // namespace

std::string weights_shortfall(const std::string& path, const model::ModelConfig& cfg, const model::ModelShard& shard,
                              DType dtype, double have) {
  if (have <= 0) return "";  // the host, or unknown
  auto bytes_at = [&](const model::ModelShard& s) {
    return static_cast<double>(model::shard_params(cfg, s).total) * static_cast<double>(dtype_size(dtype));
  };
  const double need = bytes_at(shard);
  if (need <= have) return "";
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::string knob = "a GPU with more memory";
  const parallel::LayoutModelFacts facts = model::layout_facts(cfg);
  for (int64_t t = shard.tensor_size * 2; t <= 64; t *= 2) {
    parallel::ParallelSizes sizes;
    sizes.tensor = t;
    try {
      parallel::RankLayout(sizes, static_cast<int>(t), facts, path);  // a tensor size the heads and widths take
    } catch (const InputError&) {
      continue;
    }
    model::ModelShard s = shard;
    s.tensor_size = static_cast<int>(t);
    s.tensor_rank = 0;
    if (bytes_at(s) <= 0.9 * have) {  // the rest for the KV cache
      knob = fmt::format("--tensor-parallel-size {} (under mpirun -np {} or srun), about {:.1f} GiB per GPU", t, t,
                         bytes_at(s) / gib);
      break;
    }
  }
  return fmt::format("{}: the model's {} weights need about {:.1f} GiB per GPU at tensor size {}, but the GPU has "
                     "{:.1f} GiB free: split it over more GPUs with {}",
                     path, dtype_name(dtype), need / gib, shard.tensor_size, have / gib, knob);
}

InferenceModel load_inference_model(const std::string& path, Backend& backend, DType dtype, const ShardOf& shard_of) {
  InferenceModel m;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(fmt::format("{}: no such checkpoint directory", path));
  std::optional<model::HfCheckpoint> ck;
  if (fs::exists(fs::path(path) / "config.json", ec)) {
    ck = model::HfCheckpoint::open(path);
    m.source = fs::absolute(path).lexically_normal().string();
    m.kind = "hf";
    if (fs::exists(fs::path(path) / "tokenizer.json", ec)) m.tokenizer_path = (fs::path(path) / "tokenizer.json").string();
  } else if (has_checkpoint(path) || has_weights(path)) {
    // A tracker's save directory, an iteration directory, or weights alone (`convert import`).
    const std::string dir = resolve_checkpoint_dir(path, /*weights_only=*/true);
    const fs::path config = fs::path(dir) / "config.yaml";
    if (!fs::exists(config, ec))
      throw InputError(fmt::format("{}: no config.yaml beside the weights: the model's shape is unknown", dir));
    // A LoRA run's checkpoint holds adapters on a frozen base it does not contain.
    const nlohmann::json run_config = load_config_file(config.string());
    if (const auto peft = run_config.find("peft");
        peft != run_config.end() && (peft->is_object() || (peft->is_string() && *peft == "lora")))
      throw InputError(fmt::format("{}: a LoRA checkpoint (adapters only; its config.yaml has a peft: section): merge "
                                   "it into its base first with `nemotron convert merge-lora --adapter {} --output "
                                   "DIR`, then give DIR",
                                   dir, path));
    // The weights by their Hub names (what save_checkpoint and `convert import` write), checked
    // against config.yaml; MTP heads and other tensors the model does not hold are noted, not fatal.
    ck = model::HfCheckpoint::open_weights(dir, model::load_model_config(config.string()), config.string());
    m.source = fs::absolute(dir).lexically_normal().string();
    m.kind = "native";
    if (fs::exists(fs::path(dir) / "train_state.json", ec)) m.iteration = read_train_state(dir).iteration;
    for (const fs::path& p : {fs::path(dir) / "tokenizer" / "tokenizer.json", fs::path(dir).parent_path() / "tokenizer" / "tokenizer.json"})
      if (m.tokenizer_path.empty() && fs::exists(p, ec)) m.tokenizer_path = p.string();
  } else {
    throw InputError(fmt::format("{}: neither a native checkpoint (latest_checkpointed_iteration.txt, "
                                 "train_state.json, or model.safetensors with config.yaml) nor a Hugging Face "
                                 "directory (config.json)",
                                 path));
  }
  const model::ModelShard shard = shard_of ? shard_of(ck->config()) : model::ModelShard{};
  // Before anything is allocated: a model too large for this GPU at this tensor size fails in one
  // line naming the size that fits, not in the allocator halfway through the load.
  if (const std::string why =
          weights_shortfall(m.source, ck->config(), shard, dtype, static_cast<double>(backend.available_bytes()));
      !why.empty())
    throw InputError(why);
  // Built frozen (a store that is not trainable): no gradient is ever allocated, so a model whose
  // float32 gradients would not fit beside its weights (a 70B at tensor size 4: 35 GB of bf16
  // weights, 70 GB of gradients per GPU) still loads.
  m.net = std::make_unique<model::HybridModel>(ck->config(), backend, dtype, shard, /*trainable=*/false);
  ck->load_into(m.net->params());
  m.notes = ck->notes();
  for (const std::string& s : ck->skipped()) m.notes.push_back("not used: " + s);
  return m;
}

ComputeDevice open_inference_device(const std::string& device, const std::string& where, int gpu) {
  const bool cuda = device == "cuda" || (device.rfind("cuda:", 0) == 0 && device.size() > 5 && device.size() <= 9 &&
                                         device.find_first_not_of("0123456789", 5) == std::string::npos);
  if (device != "auto" && device != "cpu" && !cuda)
    throw InputError(fmt::format("{}: expected auto, cpu, cuda or cuda:N, got \"{}\"", where, device));
  ComputeDevice d;
#if NEMOTRON_CUDA
  const int n = cuda::device_count();
  if (device == "cpu" || (device == "auto" && n == 0)) return d;
  const int index = device.size() > 5 ? std::stoi(device.substr(5)) : gpu;
  if (index >= n)
    throw InputError(fmt::format("{}: {} asked, but {} CUDA device(s) are visible{}", where, device, n,
                                 n == 0 ? " (no GPU or no driver; use --device cpu)" : ""));
  d.owned = std::make_unique<cuda::CudaBackend>(index);
  d.backend = d.owned.get();
  d.dtype = DType::bf16;
  return d;
#else
  (void)gpu;
  if (cuda)
    throw InputError(fmt::format("{}: {} asked, but this nemotron was built without CUDA (configure with "
                                 "-DNEMOTRON_CUDA=ON on a machine with nvcc)",
                                 where, device));
  return d;
#endif
}

DType inference_dtype(const std::string& name, const ComputeDevice& dev, const std::string& where) {
  const bool cpu = dev.backend->device().is_cpu();
  if (name == "auto") return dev.dtype;
  if (name == "float32") return DType::f32;
  if (name == "float64" && cpu) return DType::f64;
  if (name == "bfloat16" && !cpu) return DType::bf16;
  throw InputError(fmt::format("{} {}: not on {} (the CPU runs float32 or float64; CUDA float32 or bfloat16)", where,
                               name, dev.backend->name()));
}

}  // namespace nemotron::train
