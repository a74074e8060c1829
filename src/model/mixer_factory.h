// Builds the mixer of one layer of the stack from its spec (model/layer_spec.h).
#pragma once
#include <memory>
#include <string>

#include "model/layer_spec.h"
#include "model/mixer.h"
#include "model/model_shard.h"

namespace nemotron::model {

std::unique_ptr<Mixer> make_mixer(const ModelConfig& cfg, const LayerSpec& spec, ParamStore& store,
                                  int64_t layer_index, const ModelShard& shard = {});

}  // namespace nemotron::model
