// Where recipe commands find their configs and their command group: `-c NAME` picks
// recipes/<family>/<stage>/NAME.yaml (under $NEMOTRON_RECIPES, ./recipes, or the recipes folder
// beside the binary's build or install tree); a value with a '/' or a .yaml/.yml suffix is a path.
#pragma once
#include <string>

namespace CLI {
class App;
}

namespace nemotron::cli {

std::string resolve_recipe(const std::string& family, const std::string& stage, const std::string& name);

// The family's command group (super3, nano3), shared by every stage's file: created by whichever
// registers first.
CLI::App* family_group(CLI::App& app, const std::string& name);

// The recipe families and their one-line descriptions.
struct RecipeFamily {
  const char* name;
  const char* description;
};
inline constexpr RecipeFamily kRecipeFamilies[] = {
    {"super3", "Nemotron 3 Super recipe (hybrid Mamba-Transformer MoE, 120B-A12B)"},
    {"nano3", "Nemotron 3 Nano recipe (hybrid Mamba-Transformer MoE, 30B-A3B)"},
    {"super49b", "Llama-3.3-Nemotron-Super-49B recipe (DeciLM heterogeneous Llama-3, SFT + GRPO)"}};

}  // namespace nemotron::cli
