// The parts a Tokenizer is made of, shared by tokenizer.cpp (load/encode/decode) and the BPE
// trainer, which assembles one from its own tables. Not for use outside src/data.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/bpe_model.h"
#include "data/pretokenizer.h"
#include "data/tokenizer_added_tokens.h"
#include "data/tokenizer_post_processor.h"

namespace nemotron::data {

struct TokenizerImpl {
  std::unique_ptr<BpeModel> model;
  PreTokenizer pre_tokenizer;
  AddedVocabulary added;
  PostProcessor post_processor;
  nlohmann::json decoder;  // null or {"type": "ByteLevel", ...}
  bool byte_level_decoder = false;
  // decode tables, by id: the bytes a token decodes to, and whether it is a special token
  std::vector<std::string> decoded;
  std::vector<uint8_t> flags;  // kPresent | kSpecial
  static constexpr uint8_t kPresent = 1, kSpecial = 2;
  int32_t vocab_size = 0;

  // Fills the decode tables and vocab_size (after model, added and decoder are set).
  void finish();
};

// A tokenizer from a parsed tokenizer.json tree (`source` names the file in errors).
std::shared_ptr<const TokenizerImpl> tokenizer_from_json(const nlohmann::json& root, const std::string& source);

}  // namespace nemotron::data
