#include "model/mixer_factory.h"

#include "model/attention_mixer.h"
#include "model/mamba2_mixer.h"
#include "model/mlp_mixer.h"
#include "model/moe_mixer.h"

namespace nemotron::model {

std::unique_ptr<Mixer> make_mixer(const ModelConfig& cfg, LayerKind kind, ParamStore& store, const std::string& prefix,
                                  int64_t layer_index) {
  switch (kind) {
    case LayerKind::mamba: return std::make_unique<Mamba2Mixer>(cfg, store, prefix, layer_index);
    case LayerKind::attention: return std::make_unique<AttentionMixer>(cfg, store, prefix, layer_index);
    case LayerKind::mlp: return std::make_unique<MlpMixer>(cfg, store, prefix, layer_index);
    case LayerKind::moe: return std::make_unique<MoeMixer>(cfg, store, prefix, layer_index);
  }
  throw InputError(fmt::format("layer {}: unknown layer symbol '{}'", layer_index, static_cast<char>(kind)));
}

}  // namespace nemotron::model
