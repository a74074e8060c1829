// What the routes need to know of the model being served: its name in the API, its tokenizer,
// chat template and context length, and the tokens that end a completion.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/tokenizer.h"

namespace nemotron::serve {

struct ServedModel {
  std::string name;  // the "model" clients send and /v1/models lists
  const data::Tokenizer* tok = nullptr;
  data::ChatTemplate chat_format;  // built-in nano3 unless serve's --chat-template names another
  int64_t max_model_len = 0;  // prompt plus generated tokens at most
  int64_t vocab_size = 0;
  std::vector<int32_t> stop_token_ids;       // completions: the tokenizer's eos
  std::vector<int32_t> chat_stop_token_ids;  // chat: eos and the template's end of turn (<|im_end|>)
  // The most bytes of text one token stands for (0: unknown). A prompt longer than
  // max_model_len * max_token_bytes bytes cannot fit, and is refused before it is tokenized.
  int64_t max_token_bytes = 0;
};

// max_token_bytes of `tok`: over its vocabulary, the longer of a token's string and its decoded
// text (a byte-level token's string spells each byte in 1-2 bytes; the tokenizer has no
// normalizer, so a token covers no more input than that).
int64_t longest_token_bytes(const data::Tokenizer& tok);

}  // namespace nemotron::serve
