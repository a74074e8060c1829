#include "model/mixer_factory.h"

#include "model/attention_mixer.h"
#include "model/linear_mixer.h"
#include "model/mamba2_mixer.h"
#include "model/mlp_mixer.h"
#include "model/moe_mixer.h"

namespace nemotron::model {

std::unique_ptr<Mixer> make_mixer(const ModelConfig& cfg, const LayerSpec& spec, ParamStore& store,
                                  int64_t layer_index, const ModelShard& shard) {
  const std::string& prefix = spec.prefix;
  switch (spec.kind) {
    case LayerKind::mamba: return std::make_unique<Mamba2Mixer>(cfg, store, prefix, layer_index, shard);
    case LayerKind::attention:
      return std::make_unique<AttentionMixer>(cfg, store, prefix, layer_index, spec.num_key_value_heads, shard);
    case LayerKind::mlp:
      return std::make_unique<MlpMixer>(cfg, store, prefix, layer_index,
                                        MlpSpec{cfg.hidden_size, spec.intermediate_size, cfg.gated_mlp(), cfg.mlp_bias},
                                        shard);
    case LayerKind::moe: return std::make_unique<MoeMixer>(cfg, store, prefix, layer_index, shard);
    case LayerKind::linear: return std::make_unique<LinearMixer>(cfg, store, prefix, spec.linear, shard);
  }
  throw InputError(fmt::format("layer {}: unknown layer symbol '{}'", layer_index, static_cast<char>(spec.kind)));
}

}  // namespace nemotron::model
