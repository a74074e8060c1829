#include "cli/recipe_paths.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace nemotron::cli {

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> recipe_roots() {
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("NEMOTRON_RECIPES"); env && *env) roots.emplace_back(env);
  roots.emplace_back("recipes");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path dir = exe.parent_path();
    for (const fs::path& p :
         {dir / ".." / "recipes", dir / ".." / ".." / "recipes", dir / ".." / "share" / "nemotron" / "recipes"})
      roots.push_back(p.lexically_normal());
  }
  return roots;
}

}  // namespace

std::string resolve_recipe(const std::string& family, const std::string& stage, const std::string& name) {
  if (name.find('/') != std::string::npos || name.ends_with(".yaml") || name.ends_with(".yml")) return name;
  std::string searched;
  for (const fs::path& root : recipe_roots()) {
    const fs::path p = root / family / stage / (name + ".yaml");
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
    searched += (searched.empty() ? "" : ", ") + root.string();
  }
  throw InputError(fmt::format("-c {}: no recipe {}/{}/{}.yaml under {} (give a path to a YAML file, or set "
                               "NEMOTRON_RECIPES)",
                               name, family, stage, name, searched));
}

CLI::App* family_group(CLI::App& app, const std::string& name) {
  try {
    return app.get_subcommand(name);
  } catch (const CLI::OptionNotFound&) {
    std::string description = name;
    for (const RecipeFamily& f : kRecipeFamilies)
      if (name == f.name) description = f.description;
    CLI::App* g = app.add_subcommand(name, description);
    g->require_subcommand(1);
    return g;
  }
}

}  // namespace nemotron::cli
