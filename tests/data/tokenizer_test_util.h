// Helpers for the tokenizer tests: small tokenizer.json trees built in code, fixture paths, and
// capturing an InputError's message.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_util.h"

#include "core/error.h"
#include "data/byte_level.h"
#include "data/tokenizer.h"

namespace nemotron::data::testing {

using nlohmann::json;

// tests/fixtures/tokenizer, or $NEMOTRON_TOKENIZER_FIXTURES when set (to check freshly generated
// fixtures before committing them).
inline std::string fixture_path(const std::string& name) {
  if (const char* dir = std::getenv("NEMOTRON_TOKENIZER_FIXTURES")) return (std::filesystem::path(dir) / name).string();
  return (nemotron::testing::source_root() / "tests" / "fixtures" / "tokenizer" / name).string();
}

inline std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// A BPE model node: tokens get ids in list order.
inline json bpe_model(const std::vector<std::string>& tokens, const std::vector<std::string>& merges,
                      bool ignore_merges = false) {
  json vocab = json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  return {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", ignore_merges}};
}

// The 256 byte-level characters (ids 0..255 in byte order) followed by `extra` tokens.
inline std::vector<std::string> byte_level_tokens(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> t(byte_level_alphabet().begin(), byte_level_alphabet().end());
  t.insert(t.end(), extra.begin(), extra.end());
  return t;
}

inline json split_pretokenizer(const std::string& regex, const std::string& behavior = "Isolated",
                               bool invert = false) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behavior}, {"invert", invert}};
}

inline json byte_level_pretokenizer(bool add_prefix_space = false, bool use_regex = false) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true},
          {"use_regex", use_regex}};
}

inline json added_token(int id, const std::string& content, bool special, bool lstrip = false, bool rstrip = false,
                        bool single_word = false, bool normalized = false) {
  return {{"id", id},         {"content", content}, {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

inline json tokenizer_json(const json& model, const json& pre_tokenizer = nullptr, const json& added = json::array(),
                           const json& decoder = nullptr, const json& post_processor = nullptr) {
  return {{"version", "1.0"},         {"truncation", nullptr},   {"padding", nullptr},
          {"added_tokens", added},    {"normalizer", nullptr},   {"pre_tokenizer", pre_tokenizer},
          {"post_processor", post_processor}, {"decoder", decoder}, {"model", model}};
}

inline Tokenizer make(const json& j) { return Tokenizer::from_json_text(j.dump(), "tok.json"); }

// The byte-level form of a UTF-8 string ("Ġ" for a space ...).
inline std::string bl(const std::string& s) {
  std::string out;
  byte_level_encode(s, out);
  return out;
}

}  // namespace nemotron::data::testing
