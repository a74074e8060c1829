#include "data/tokenizer_json.h"

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::data {

using nlohmann::json;

void JsonAt::fail(const std::string& problem) const { throw_config_error(source, path, problem); }

void JsonAt::expected(const std::string& what, const json& got) const {
  fail("expected " + what + ", got " + describe_value(got));
}

const json& json_require(const json& obj, const std::string& k, const JsonAt& at) {
  if (!obj.is_object()) at.expected("a mapping", obj);
  auto it = obj.find(k);
  if (it == obj.end()) at.key(k).fail("missing");
  return *it;
}

const json& json_object(const json& obj, const std::string& k, const JsonAt& at) {
  const json& v = json_require(obj, k, at);
  if (!v.is_object()) at.key(k).expected("a mapping", v);
  return v;
}

std::string json_string(const json& obj, const std::string& k, const JsonAt& at) {
  const json& v = json_require(obj, k, at);
  if (!v.is_string()) at.key(k).expected("a string", v);
  return v.get<std::string>();
}

bool json_bool_or(const json& obj, const std::string& k, bool fallback, const JsonAt& at) {
  if (!obj.is_object()) at.expected("a mapping", obj);
  auto it = obj.find(k);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) at.key(k).expected("true or false", *it);
  return it->get<bool>();
}

std::optional<std::string> json_opt_string(const json& obj, const std::string& k, const JsonAt& at) {
  if (!obj.is_object()) at.expected("a mapping", obj);
  auto it = obj.find(k);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) at.key(k).expected("a string or null", *it);
  return it->get<std::string>();
}

int32_t json_id(const json& v, const JsonAt& at) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0)) {
    const uint64_t id = v.get<uint64_t>();
    if (id < (uint64_t{1} << 31)) return static_cast<int32_t>(id);
  }
  at.expected("a token id (an integer in [0, 2^31))", v);
}

}  // namespace nemotron::data
