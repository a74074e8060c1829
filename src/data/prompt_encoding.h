// One rule for the tokens a text prompt starts with, shared by eval, serve and generate (eval used
// to add <s> found by name while serve added nothing, so the same weights scored differently): the
// BOS the tokenizer's own post-processor template puts before the text (as HF
// encode(text, add_special_tokens=True) does), or nothing when its template adds none. Nothing is
// appended after the text: a template's EOS would end the prompt its continuation follows. Chat
// prompts are rendered templates and are encoded with nothing added (data/chat_template.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace nemotron::data {

// The token every text prompt starts with, if any.
inline std::optional<int32_t> prompt_bos(const Tokenizer& tok) { return tok.template_bos_token_id(); }

// prompt_bos, then the text's tokens.
std::vector<int32_t> encode_prompt(const Tokenizer& tok, std::string_view text);

}  // namespace nemotron::data
