#include "core/config_tree.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "core/json_limits.h"

namespace nemotron {

using nlohmann::json;

void throw_config_error(const std::string& source, const std::string& key, const std::string& problem) {
  std::string msg;
  for (const std::string* part : {&source, &key, &problem}) {
    if (part->empty()) continue;
    if (!msg.empty()) msg += ": ";
    msg += *part;
  }
  throw InputError(msg);
}

// ---- YAML ---------------------------------------------------------------------------------------

json parse_yaml_scalar(const std::string& s) {
  // YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
  static const std::regex kNull("~|null|Null|NULL|");
  static const std::regex kTrue("true|True|TRUE"), kFalse("false|False|FALSE");
  static const std::regex kInt("[-+]?[0-9]+"), kOct("0o[0-7]+"), kHex("0x[0-9a-fA-F]+");
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  static const std::regex kInf("[-+]?\\.(inf|Inf|INF)"), kNan("\\.(nan|NaN|NAN)");
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kTrue)) return true;
  if (std::regex_match(s, kFalse)) return false;
  auto parse_int = [&](const std::string& digits, int base) -> std::optional<json> {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(digits.c_str(), &end, base);
    if (errno == ERANGE) return std::nullopt;
    return json(static_cast<int64_t>(v));
  };
  if (std::regex_match(s, kInt)) {
    if (auto v = parse_int(s, 10)) return *v;
    return std::strtod(s.c_str(), nullptr);  // too large for int64: keep its magnitude
  }
  if (std::regex_match(s, kOct)) {
    if (auto v = parse_int(s.substr(2), 8)) return *v;
  }
  if (std::regex_match(s, kHex)) {
    if (auto v = parse_int(s.substr(2), 16)) return *v;
  }
  if (std::regex_match(s, kFloat)) return std::strtod(s.c_str(), nullptr);
  if (std::regex_match(s, kInf))
    return s[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  if (std::regex_match(s, kNan)) return std::numeric_limits<double>::quiet_NaN();
  return s;
}

namespace {

std::string join_key(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// yaml-cpp keeps an alias as a second reference to its anchor's node, so a few hundred bytes of
// nested aliases ("billion laughs") are a small graph that expands into gigabytes as a tree. The
// conversion counts what it builds (nodes and scalar bytes) against a budget no alias-free
// document can reach: a node takes at least 2 bytes of text and a scalar's bytes are in the text.
// An error names the line of the innermost mapping key being expanded (an alias's own mark is its
// anchor's, which says less).
class ExpansionBudget {
 public:
  explicit ExpansionBudget(size_t text_bytes) : left_(16 * text_bytes + (size_t{4} << 20)), total_(left_) {}
  void spend(size_t bytes, const std::string& source, int line) {
    if (bytes <= left_) {
      left_ -= bytes;
      return;
    }
    throw_config_error(source, "",
                       fmt::format("line {}: aliases expand the document beyond {} MiB (aliases nested in "
                                   "aliases?); write the values out or nest fewer aliases",
                                   line, total_ >> 20));
  }

 private:
  size_t left_, total_;
};

constexpr size_t kNodeCost = 16;  // a tree node's nominal bytes, beside its scalar text

json yaml_to_json(const YAML::Node& n, const std::string& source, const std::string& path, ExpansionBudget& budget,
                  int line) {
  budget.spend(kNodeCost + (n.IsScalar() ? n.Scalar().size() : 0), source, line);
  switch (n.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Scalar: {
      const std::string& tag = n.Tag();
      // "?" = plain scalar (resolved by the schema); "!" = quoted or block scalar (a string).
      if (tag == "!" || tag == "tag:yaml.org,2002:str") return n.Scalar();
      return parse_yaml_scalar(n.Scalar());
    }
    case YAML::NodeType::Sequence: {
      json a = json::array();
      size_t i = 0;
      for (const YAML::Node& item : n)
        a.push_back(yaml_to_json(item, source, fmt::format("{}[{}]", path, i++), budget, line));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (!it->first.IsScalar())
          throw_config_error(source, path, fmt::format("line {}: mapping keys must be plain words",
                                                       it->first.Mark().line + 1));
        const std::string key = it->first.Scalar();
        if (o.contains(key))
          throw_config_error(source, join_key(path, key),
                             fmt::format("duplicate key (line {})", it->first.Mark().line + 1));
        const int key_line = it->first.Mark().line + 1;
        budget.spend(key.size(), source, key_line);
        o[key] = yaml_to_json(it->second, source, join_key(path, key), budget, key_line);
      }
      return o;
    }
  }
  return nullptr;
}

json yaml_to_json(const YAML::Node& n, const std::string& source, const std::string& path, size_t text_bytes) {
  ExpansionBudget budget(text_bytes);
  return yaml_to_json(n, source, path, budget, n.Mark().line + 1);
}

}  // namespace

json parse_yaml_text(const std::string& text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    std::string hint;
    if (e.msg.find("anchor") != std::string::npos)  // `pattern: *E` reads as an alias
      hint = " (a value starting with * is a YAML alias; quote it: \"*E\")";
    throw_config_error(source, "", fmt::format("YAML parse error at line {}, column {}: {}{}",
                                               e.mark.line + 1, e.mark.column + 1, e.msg, hint));
  } catch (const YAML::Exception& e) {
    throw_config_error(source, "", fmt::format("YAML parse error: {}", e.msg));
  }
  return yaml_to_json(root, source, "", text.size());
}

// ---- JSON ---------------------------------------------------------------------------------------

namespace {

// Rewrites Python's bare Infinity / -Infinity / NaN tokens (outside strings) as __float__ objects.
std::string rewrite_python_floats(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) out += text[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    for (const char* lit : {"-Infinity", "Infinity", "NaN"}) {
      size_t len = std::strlen(lit);
      if (text.compare(i, len, lit) == 0) {
        out += fmt::format("{{\"__float__\": \"{}\"}}", lit);
        i += len - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

}  // namespace

json parse_json_text(const std::string& text, const std::string& source) {
  json out;
  if (std::optional<JsonError> e = parse_json_bounded(rewrite_python_floats(text), out))
    throw_config_error(source, "", fmt::format("JSON parse error at {}: {}", e->where(), e->reason));
  return out;
}

std::optional<double> json_number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_object() && v.size() == 1 && v.contains("__float__") && v["__float__"].is_string()) {
    const std::string s = v["__float__"].get<std::string>();
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  return std::nullopt;
}

json load_config_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw_config_error(path, "", "is a directory, expected a config file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_config_error(path, "", fmt::format("cannot open: {}", std::strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".json") return parse_json_text(ss.str(), path);
  return parse_yaml_text(ss.str(), path);
}

// ---- overrides ----------------------------------------------------------------------------------

bool is_override(const std::string& arg) {
  return !arg.empty() && arg[0] != '-' && arg.find('=') != std::string::npos;
}

void apply_override(json& tree, const std::string& assignment, const std::string& source) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw_config_error(source, "", fmt::format("override \"{}\": expected key=value", assignment));
  const std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t dot = key.find('.', start);
    parts.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (parts.back().empty())
      throw_config_error(source, "", fmt::format("override \"{}\": empty part in key \"{}\"", assignment, key));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  json value;
  try {
    value = yaml_to_json(YAML::Load(text), source, key, text.size());
  } catch (const YAML::Exception& e) {
    throw_config_error(source, key, fmt::format("cannot parse value \"{}\": {}", text, e.msg));
  }
  if (tree.is_null()) tree = json::object();
  json* node = &tree;
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    json* next = nullptr;
    if (node->is_array()) {  // `sources.0.files=...`: a list item by its index
      const std::string& p = parts[i];
      const bool digits = p.find_first_not_of("0123456789") == std::string::npos && p.size() <= 9;
      if (node->empty())
        throw_config_error(source, key, fmt::format("cannot set it: {} is an empty list", walked));
      if (!digits || std::stoul(p) >= node->size())
        throw_config_error(source, key, fmt::format("cannot set it: {} is a list; \"{}\" is not an index of it "
                                                    "(0 to {})",
                                                    walked, p, node->size() - 1));
      next = &(*node)[std::stoul(p)];
    } else if (node->is_object()) {
      next = &(*node)[parts[i]];
    } else {
      throw_config_error(source, key, fmt::format("cannot set it: {} is not a mapping (it is {})",
                                                  walked.empty() ? "the root" : walked, describe_value(*node)));
    }
    walked = join_key(walked, parts[i]);
    if (i + 1 == parts.size()) {
      *next = value;
    } else {
      if (next->is_null()) *next = json::object();
      node = next;
    }
  }
}

void apply_overrides(json& tree, const std::vector<std::string>& assignments, const std::string& source) {
  for (const std::string& a : assignments) apply_override(tree, a, source);
}

// ---- suggestions and messages -------------------------------------------------------------------

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string nearest_key(const std::string& word, const std::vector<std::string>& candidates) {
  // A plausible typo: at most a third of the longer word's letters (and at least 2) differ.
  size_t best = std::numeric_limits<size_t>::max();
  std::string best_key;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d <= std::max<size_t>(2, std::max(word.size(), c.size()) / 3) && d < best) best = d, best_key = c;
  }
  return best_key;
}

std::string describe_value(const json& v) {
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isnan(d)) return ".nan";
    if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
  }
  return json_excerpt(v, 80);
}

// ---- ConfigReader -------------------------------------------------------------------------------

namespace {
const json& null_json() {
  static const json kNull;
  return kNull;
}
}  // namespace

ConfigReader::ConfigReader(const json& node, std::string source, std::string path)
    : node_(&node), source_(std::move(source)), path_(std::move(path)) {
  if (!node.is_null() && !node.is_object())
    throw_config_error(source_, path_, "expected a mapping of keys, got " + describe_value(node));
}

std::string ConfigReader::key_path(const std::string& key) const { return join_key(path_, key); }

void ConfigReader::fail(const std::string& key, const std::string& problem) const {
  throw_config_error(source_, key_path(key), problem);
}

void ConfigReader::remember(const std::string& key) {
  if (known_.insert(key).second) known_order_.push_back(key);
}

const json& ConfigReader::lookup(const std::string& key) {
  remember(key);
  if (!node_->is_object()) return null_json();
  auto it = node_->find(key);
  return it == node_->end() ? null_json() : *it;
}

bool ConfigReader::has(const std::string& key) { return !lookup(key).is_null(); }

const json& ConfigReader::get_raw(const std::string& key) { return lookup(key); }

int64_t ConfigReader::as_int(const std::string& key, const json& v, const char* expected) const {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(key, fmt::format("expected {}, got {} (too large)", expected, describe_value(v)));
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {  // 1e5 or 128.0: accept when it is an exact integer
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  fail(key, fmt::format("expected {}, got {}", expected, describe_value(v)));
}

int64_t ConfigReader::get_int(const std::string& key, int64_t fallback) {
  const json& v = lookup(key);
  return v.is_null() ? fallback : as_int(key, v, "an integer");
}

int64_t ConfigReader::get_positive_int(const std::string& key, int64_t fallback) {
  const json& v = lookup(key);
  if (v.is_null()) return fallback;
  int64_t n = as_int(key, v, "a positive integer");
  if (n <= 0) fail(key, "expected a positive integer, got " + describe_value(v));
  return n;
}

int64_t ConfigReader::get_nonnegative_int(const std::string& key, int64_t fallback) {
  const json& v = lookup(key);
  if (v.is_null()) return fallback;
  int64_t n = as_int(key, v, "a non-negative integer");
  if (n < 0) fail(key, "expected a non-negative integer, got " + describe_value(v));
  return n;
}

double ConfigReader::get_number(const std::string& key, double fallback) {
  const json& v = lookup(key);
  if (v.is_null()) return fallback;
  if (auto d = json_number(v)) return *d;
  fail(key, "expected a number, got " + describe_value(v));
}

bool ConfigReader::get_bool(const std::string& key, bool fallback) {
  const json& v = lookup(key);
  if (v.is_null()) return fallback;
  if (!v.is_boolean()) fail(key, "expected true or false, got " + describe_value(v));
  return v.get<bool>();
}

std::string ConfigReader::get_string(const std::string& key, const std::string& fallback) {
  const json& v = lookup(key);
  if (v.is_null()) return fallback;
  if (!v.is_string()) fail(key, "expected a string, got " + describe_value(v));
  return v.get<std::string>();
}

ConfigReader& ConfigReader::section(const std::string& key) {
  auto it = sections_.find(key);
  if (it != sections_.end()) return *it->second;
  const json& v = lookup(key);
  auto reader = std::make_unique<ConfigReader>(v, source_, key_path(key));
  return *(sections_[key] = std::move(reader));
}

void ConfigReader::check_unknown_keys() const {
  if (node_->is_object()) {
    for (auto it = node_->begin(); it != node_->end(); ++it) {
      if (known_.count(it.key())) continue;
      std::string near = nearest_key(it.key(), known_order_);
      fail(it.key(), near.empty() ? "unknown key" : fmt::format("unknown key (did you mean \"{}\"?)", near));
    }
  }
  for (const auto& [key, reader] : sections_) reader->check_unknown_keys();
}

}  // namespace nemotron
