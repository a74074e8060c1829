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
  data::ChatFormat chat_format = data::ChatFormat::nano3;
  int64_t max_model_len = 0;  // prompt plus generated tokens at most
  int64_t vocab_size = 0;
  std::vector<int32_t> stop_token_ids;       // completions: the tokenizer's eos
  std::vector<int32_t> chat_stop_token_ids;  // chat: eos and the template's end of turn (<|im_end|>)
};

}  // namespace nemotron::serve
