// Blend specifications (shared/reference/data-formats.md §2): Megatron's flat
// `[w1, prefix1, w2, prefix2, ...]` lists (or prefixes alone, weighted by size) and the per-split
// JSON `{"train": [...], "valid": [...], "test": [...]}` that data prep writes as `blend.json` and
// pretraining reads. Parsing is stricter than Megatron's where Megatron would silently misread:
// mixed weight/prefix lists, non-positive weights, prefixes with a `.bin`/`.idx` extension, empty
// lists and unknown keys are InputErrors naming the file and the entry.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/split.h"

namespace nemotron::data {

struct Blend {
  std::vector<std::string> prefixes;
  // Relative weights, one per prefix; nullopt = weight each dataset by its size (§4.3).
  std::optional<std::vector<double>> weights;
};

// get_blend_from_list. `where` names the list in errors ("blend.json: train"); entries are
// called `where[i]`.
Blend parse_blend_list(const std::vector<std::string>& entries, const std::string& where);
// The flat list back (weights as Python's str(float): "2.2", "1.0").
std::vector<std::string> blend_to_list(const Blend& blend);

// One blend per split; nullopt = no data for that split (JSON null).
using BlendPerSplit = std::array<std::optional<Blend>, 3>;

// A per-split JSON tree. Each of "train", "valid", "test" must be present and be a list of
// strings (weights may also be JSON numbers), one whitespace-separated string, or null.
BlendPerSplit parse_blend_per_split(const nlohmann::json& tree, const std::string& source);
BlendPerSplit load_blend_json(const std::string& path);
nlohmann::json blend_per_split_to_json(const BlendPerSplit& blends);
// Writes `path` through a temporary file and a rename.
void write_blend_json(const std::string& path, const BlendPerSplit& blends);

// Python's str() of a float: shortest round-trip digits, always with a '.' or exponent ("1.0").
std::string python_float_str(double v);

}  // namespace nemotron::data
