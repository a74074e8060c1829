#include "model/weights_io.h"

#include <set>

#include "model/finite_check.h"

namespace nemotron::model {

void check_loaded_finite(const Tensor& host, const std::string& source, const std::string& name) {
  const std::string bad = nonfinite_summary(host);
  if (!bad.empty())
    throw InputError(fmt::format("{}: tensor \"{}\" {} holds non-finite values ({}): the weights were saved by a run "
                                 "that had diverged, or the file is corrupt; load an earlier checkpoint",
                                 source, name, host.shape().str(), bad));
}

std::vector<io::NamedTensor> named_weights(const ParamStore& store, const ParamFilter& only) {
  std::vector<io::NamedTensor> out;
  for (const Param* p : store.all())
    if (!only || only(*p)) out.push_back({p->name, p->truth()});  // float32 masters of bf16 weights
  return out;
}

void save_weights(const std::string& dir, const ParamStore& store, size_t max_shard_bytes, const ParamFilter& only) {
  io::save_sharded_safetensors(dir, named_weights(store, only), max_shard_bytes, {{"format", "pt"}});
}

LoadReport load_weights(const io::SafetensorsSet& set, ParamStore& store, const std::string& source, bool strict,
                        const ParamFilter& only, const WeightSink* sink) {
  const WeightSink whole;
  const WeightSink& to = sink ? *sink : whole;
  std::set<std::string> wanted;
  for (Param* p : store.all()) {
    if (only && !only(*p)) continue;
    wanted.insert(p->name);
    if (!set.contains(p->name))
      throw InputError(fmt::format("{}: missing tensor \"{}\" (shape {}) that the model needs", source, p->name,
                                   p->value.shape().str()));
    const io::StTensorInfo& info = set.info(p->name);
    if (info.shape != p->global_shape())
      throw InputError(fmt::format("{}: tensor \"{}\" has shape {} but the model expects {} (a checkpoint of another "
                                   "model shape?)",
                                   source, p->name, info.shape.str(), p->global_shape().str()));
    const auto [begin, end] = to.range(*p);
    if (begin >= end) continue;
    // This rank's part under tensor parallelism, in the truth's dtype (float32 for bf16 weights).
    Tensor loaded = local_part(*p, set.load(p->name, to.dtype(*p)));
    if (begin > 0 || end < loaded.numel()) loaded = loaded.view({loaded.numel()}).slice(begin, end);
    check_loaded_finite(loaded, source, p->name);
    to.write(*p, loaded.view({loaded.numel()}));
  }
  LoadReport report;
  for (const std::string& name : set.names())
    if (!wanted.count(name)) report.unused.push_back(name);
  if (strict && !report.unused.empty())
    throw InputError(fmt::format("{}: {} tensor(s) the model does not have, first \"{}\" (a checkpoint of another "
                                 "model shape?)",
                                 source, report.unused.size(), report.unused.front()));
  return report;
}

}  // namespace nemotron::model
