// Typed reads from a parsed tokenizer.json. Every failure is an InputError that names the file,
// the JSON path and the problem: `tok.json: model.merges[17]: expected "a b" or ["a","b"], got 42`.
// Like Hugging Face, keys nobody reads are ignored (tokenizer.json files carry many).
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace nemotron::data {

// Where a node sits: the file and its JSON path ("model.merges[3]"; empty = the root).
struct JsonAt {
  const std::string& source;
  std::string path;

  JsonAt key(const std::string& k) const { return {source, path.empty() ? k : path + "." + k}; }
  JsonAt index(size_t i) const { return {source, path + "[" + std::to_string(i) + "]"}; }
  [[noreturn]] void fail(const std::string& problem) const;
  // "expected <what>, got <value>"
  [[noreturn]] void expected(const std::string& what, const nlohmann::json& got) const;
};

// obj[k], which must be present (null counts as present); `at` is the location of obj.
const nlohmann::json& json_require(const nlohmann::json& obj, const std::string& k, const JsonAt& at);
// obj[k] as a mapping/string/bool; `at` is the location of obj.
const nlohmann::json& json_object(const nlohmann::json& obj, const std::string& k, const JsonAt& at);
std::string json_string(const nlohmann::json& obj, const std::string& k, const JsonAt& at);
// Absent or null -> fallback / nullopt.
bool json_bool_or(const nlohmann::json& obj, const std::string& k, bool fallback, const JsonAt& at);
std::optional<std::string> json_opt_string(const nlohmann::json& obj, const std::string& k, const JsonAt& at);
// A JSON integer in [0, 2^31).
int32_t json_id(const nlohmann::json& v, const JsonAt& at);

}  // namespace nemotron::data
