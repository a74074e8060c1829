// Builds the mixer of one layer from its pattern symbol (M, *, -, E).
#pragma once
#include <memory>
#include <string>

#include "model/mixer.h"

namespace nemotron::model {

std::unique_ptr<Mixer> make_mixer(const ModelConfig& cfg, LayerKind kind, ParamStore& store, const std::string& prefix,
                                  int64_t layer_index);

}  // namespace nemotron::model
