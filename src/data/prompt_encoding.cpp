#include "data/prompt_encoding.h"

namespace nemotron::data {

std::vector<int32_t> encode_prompt(const Tokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids;
  if (std::optional<int32_t> bos = prompt_bos(tok)) ids.push_back(*bos);
  const std::vector<int32_t> body = tok.encode(text, /*add_special_tokens=*/false);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

}  // namespace nemotron::data
