// Config trees: YAML or JSON files loaded into one nlohmann::json tree, dotted `key=value`
// overrides, and ConfigReader, a typed reader that remembers every key it was asked for, so a key
// nobody asked for is an error that suggests the nearest known key. Every problem with the user's
// input is an InputError reading "<source>: <dotted.key>: <problem>".
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace nemotron {

// Throws InputError "<source>: <key>: <problem>" (empty parts are left out).
[[noreturn]] void throw_config_error(const std::string& source, const std::string& key,
                                     const std::string& problem);

// Reads a `.yaml`/`.yml` or `.json` file (by extension; anything else is tried as YAML, which is
// a superset of JSON). Parse errors name the file and, where the parser gives it, line and column.
nlohmann::json load_config_file(const std::string& path);

// YAML text -> tree. Scalars are typed by the YAML 1.2 core schema: null (`~`, `null`, empty),
// bool (`true`/`false` in three casings), int (decimal, `0x`, `0o`), float (incl. `1e-5`, `.inf`,
// `-.inf`, `.nan`); anything else, and any quoted or `!!str`-tagged scalar, is a string.
// Duplicate keys in a mapping are an error.
nlohmann::json parse_yaml_text(const std::string& text, const std::string& source);
// One plain (unquoted) YAML scalar typed as above.
nlohmann::json parse_yaml_scalar(const std::string& text);

// JSON text -> tree. Python's non-standard `Infinity`, `-Infinity` and `NaN` literals (which
// json.dumps writes) are accepted and become {"__float__": "Infinity"} etc., the form recent
// transformers writes; number readers below accept both forms.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);

// A number from a tree node: a JSON number or {"__float__": "Infinity"|"-Infinity"|"NaN"}.
std::optional<double> json_number(const nlohmann::json& v);

// `a.b.c=value`: sets tree.a.b.c, creating mappings on the way; the value is parsed as a YAML
// scalar or flow value (`8`, `1e-4`, `.inf`, `"8"`, `[1, 2]`, `{k: v}`; empty = null).
void apply_override(nlohmann::json& tree, const std::string& assignment, const std::string& source);
void apply_overrides(nlohmann::json& tree, const std::vector<std::string>& assignments,
                     const std::string& source);
// True for an argument of the form `key=value` (contains '=' and does not start with '-').
bool is_override(const std::string& arg);

// Levenshtein distance, and the candidate nearest to `word` ("" if none is close enough to be a
// plausible typo).
size_t edit_distance(std::string_view a, std::string_view b);
std::string nearest_key(const std::string& word, const std::vector<std::string>& candidates);

// A value as an error message shows it: strings quoted (`"eight"`), numbers as written, `.inf`.
std::string describe_value(const nlohmann::json& v);

// Reads one mapping of a tree. Every getter registers its key as known (present or not), so
// check_unknown_keys() can report keys nobody asked for. A null value counts as absent.
// Type errors name the dotted key, the expected type and the value.
class ConfigReader {
 public:
  // `node` must be a mapping or null (= empty). `source` prefixes errors (usually the file);
  // `path` is the node's dotted key ("model"), empty at the root.
  // The reader keeps a pointer to `node`, which must outlive it (hence no temporaries).
  ConfigReader(const nlohmann::json& node, std::string source, std::string path = "");
  ConfigReader(nlohmann::json&&, std::string, std::string = "") = delete;
  ConfigReader(const ConfigReader&) = delete;
  ConfigReader& operator=(const ConfigReader&) = delete;

  bool has(const std::string& key);  // present and not null
  int64_t get_int(const std::string& key, int64_t fallback);
  int64_t get_positive_int(const std::string& key, int64_t fallback);
  int64_t get_nonnegative_int(const std::string& key, int64_t fallback);
  double get_number(const std::string& key, double fallback);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  // The raw node (null if absent), for values with their own shape (lists, pairs).
  const nlohmann::json& get_raw(const std::string& key);
  // A known key whose value is deliberately not used (a legacy field).
  void ignore(const std::string& key) { remember(key); }
  // A nested mapping (absent = empty); checked by check_unknown_keys() of this reader.
  ConfigReader& section(const std::string& key);

  // "model.hidden_size" for key "hidden_size".
  std::string key_path(const std::string& key) const;
  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;
  // Throws for the first key of this mapping (or of a section read through it) that no getter
  // asked for: `unknown key (did you mean "hidden_size"?)`.
  void check_unknown_keys() const;

 private:
  void remember(const std::string& key);
  const nlohmann::json& lookup(const std::string& key);
  int64_t as_int(const std::string& key, const nlohmann::json& v, const char* expected) const;

  const nlohmann::json* node_;
  std::string source_, path_;
  std::set<std::string> known_;
  std::vector<std::string> known_order_;  // suggestion candidates, in the order asked
  std::map<std::string, std::unique_ptr<ConfigReader>> sections_;
};

}  // namespace nemotron
