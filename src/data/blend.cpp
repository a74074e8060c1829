#include "data/blend.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::data {

namespace {

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Python float(): surrounding whitespace allowed, the whole rest must be a number.
std::optional<double> parse_float(const std::string& s) {
  const std::string t = trim(s);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return v;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string check_prefix(const std::string& raw, const std::string& entry) {
  const std::string p = trim(raw);
  if (p.empty()) throw InputError(fmt::format("{}: expected a dataset path prefix, got an empty string", entry));
  if (ends_with(p, ".bin") || ends_with(p, ".idx"))
    throw InputError(fmt::format("{}: \"{}\": expected a path prefix without the .bin/.idx extension (\"{}\")",
                                 entry, p, p.substr(0, p.size() - 4)));
  return p;
}

}  // namespace

std::string python_float_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

Blend parse_blend_list(const std::vector<std::string>& entries, const std::string& where) {
  auto entry = [&](size_t i) { return fmt::format("{}[{}]", where, i); };
  if (entries.empty())
    throw InputError(fmt::format("{}: empty list; give [weight, prefix, ...] or [prefix, ...] (use null for a "
                                 "split without data)", where));
  Blend blend;
  const bool even = entries.size() % 2 == 0;
  if (even && parse_float(entries[0])) {
    std::vector<double> weights;
    for (size_t i = 0; i < entries.size(); i += 2) {
      auto w = parse_float(entries[i]);
      if (!w)
        throw InputError(fmt::format("{}: expected a weight (every other entry is one, as {} = \"{}\" is), got "
                                     "\"{}\"", entry(i), entry(0), entries[0], entries[i]));
      if (!(*w > 0) || !std::isfinite(*w))
        throw InputError(fmt::format("{}: weight: expected a positive number, got \"{}\"", entry(i), entries[i]));
      if (parse_float(entries[i + 1]))
        throw InputError(fmt::format("{}: expected a dataset path prefix after the weight {} = \"{}\", got the "
                                     "number \"{}\"", entry(i + 1), entry(i), entries[i], entries[i + 1]));
      weights.push_back(*w);
      blend.prefixes.push_back(check_prefix(entries[i + 1], entry(i + 1)));
    }
    blend.weights = std::move(weights);
    return blend;
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    if (parse_float(entries[i]))
      throw InputError(fmt::format(
          "{}: \"{}\" is a number, but the list {} read as prefixes only ({}); give every dataset as a weight "
          "followed by its prefix, or prefixes alone", entry(i), entries[i],
          even ? "starts with a prefix, so it is" : "has an odd number of entries, so it is", entries.size()));
    blend.prefixes.push_back(check_prefix(entries[i], entry(i)));
  }
  return blend;
}

std::vector<std::string> blend_to_list(const Blend& blend) {
  std::vector<std::string> out;
  for (size_t i = 0; i < blend.prefixes.size(); ++i) {
    if (blend.weights) out.push_back(python_float_str((*blend.weights)[i]));
    out.push_back(blend.prefixes[i]);
  }
  return out;
}

BlendPerSplit parse_blend_per_split(const nlohmann::json& tree, const std::string& source) {
  if (!tree.is_object())
    throw InputError(fmt::format("{}: expected an object with keys \"train\", \"valid\", \"test\", got {}", source,
                                 describe_value(tree)));
  std::vector<std::string> known;
  for (Split s : kSplits) known.emplace_back(split_name(s));
  for (const auto& [key, value] : tree.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      const std::string near = nearest_key(key, known);
      throw InputError(fmt::format("{}: \"{}\": unknown key{}; expected \"train\", \"valid\", \"test\"", source, key,
                                   near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
    }
  }
  BlendPerSplit out;
  for (Split s : kSplits) {
    const std::string key = split_name(s), where = fmt::format("{}: {}", source, key);
    if (!tree.contains(key))
      throw InputError(fmt::format("{}: \"{}\": missing; all of \"train\", \"valid\", \"test\" are required (null "
                                   "for a split without data)", source, key));
    const nlohmann::json& v = tree.at(key);
    if (v.is_null()) continue;
    std::vector<std::string> entries;
    if (v.is_string()) {
      std::istringstream words(v.get<std::string>());
      for (std::string w; words >> w;) entries.push_back(w);
    } else if (v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (v[i].is_string()) {
          entries.push_back(v[i].get<std::string>());
        } else if (v[i].is_number()) {
          entries.push_back(python_float_str(v[i].get<double>()));
        } else {
          throw InputError(fmt::format("{}[{}]: expected a string (a weight or a path prefix), got {}", where, i,
                                       describe_value(v[i])));
        }
      }
    } else {
      throw InputError(fmt::format("{}: expected a list of strings, one whitespace-separated string, or null, got {}",
                                   where, describe_value(v)));
    }
    out[static_cast<int>(s)] = parse_blend_list(entries, where);
  }
  return out;
}

BlendPerSplit load_blend_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::stringstream text;
  text << f.rdbuf();
  return parse_blend_per_split(parse_json_text(text.str(), path), path);
}

nlohmann::json blend_per_split_to_json(const BlendPerSplit& blends) {
  nlohmann::json out = nlohmann::json::object();
  for (Split s : kSplits) {
    const auto& b = blends[static_cast<int>(s)];
    out[split_name(s)] = b ? nlohmann::json(blend_to_list(*b)) : nlohmann::json(nullptr);
  }
  return out;
}

void write_blend_json(const std::string& path, const BlendPerSplit& blends) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw InputError(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
    f << blend_per_split_to_json(blends).dump(2) << "\n";
    if (!f.flush()) throw Error(fmt::format("{}: write failed", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw Error(fmt::format("{}: rename failed: {}", path, std::strerror(errno)));
}

}  // namespace nemotron::data
