// Tokenizer: a Hugging Face tokenizer.json (BPE model, Split/ByteLevel pre-tokenizers, added
// tokens, ByteLevel decoder, template post-processor) loaded without Python, encoding byte-exactly
// like HF `tokenizers` `encode(text, add_special_tokens)` and decoding like `decode`. Anything the
// file asks for that is not implemented (a normalizer, another model, another pre-tokenizer) is an
// InputError naming the file and JSON path, never a silent difference. A Tokenizer is immutable
// apart from the bos/eos overrides and is safe to use from many threads; copies share the tables.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nemotron::data {

struct TokenizerImpl;

class Tokenizer {
 public:
  // Reads a tokenizer.json; errors name the file and the JSON path.
  static Tokenizer load(const std::string& path);
  // The same from JSON text; `source` names it in errors.
  static Tokenizer from_json_text(const std::string& text, const std::string& source = "tokenizer.json");

  // Writes a tokenizer.json that HF `tokenizers` (>= 0.20) loads and that load() reads back to an
  // identical tokenizer: the pre-tokenizer, post-processor and decoder as they were read, the model
  // and added tokens from our tables. Written to a temporary file, then renamed into place.
  void save(const std::string& path) const;
  std::string to_json_text() const;

  // Token ids of `text` (valid UTF-8, else InputError naming the byte offset). With
  // add_special_tokens the post-processor's template is applied (e.g. a leading <s>).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // encode() of every text, on all OpenMP threads; result i belongs to texts[i].
  std::vector<std::vector<int32_t>> encode_batch(const std::vector<std::string>& texts,
                                                 bool add_special_tokens = false) const;
  // Text of `ids` through the decoder (bytes that are not valid UTF-8 become U+FFFD, as in HF).
  // Ids the tokenizer does not have are skipped, as HF does; skip_special_tokens also drops
  // special added tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One more than the largest id (model or added token): the embedding table's row count.
  int32_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // True for added tokens marked special.
  bool is_special(int32_t id) const;

  // Beginning / end of sequence: an override if set, else the token right before / after the
  // text in the post-processor's template, else the first present of the conventional names
  // (<s> <|begin_of_text|> <bos> <|startoftext|> / </s> <|end_of_text|> <|endoftext|> <eos>).
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  // The BOS a prompt starts with (data/prompt_encoding.h): the special token the post-processor's
  // template puts right before the text, as HF encode(text, add_special_tokens=True) does; none
  // when the template adds none. No override and no name fallback: the tokenizer's config decides.
  std::optional<int32_t> template_bos_token_id() const;
  // A token's bytes as the decoder makes them, before the lossy UTF-8 step of decode() (a
  // byte-level token may hold part of a character); nullopt for an id the tokenizer lacks.
  std::optional<std::string> token_bytes(int32_t id) const;
  // Overrides; InputError if `token` is not in the vocabulary.
  void set_bos_token(const std::string& token);
  void set_eos_token(const std::string& token);

  // Wraps assembled tables (used by train_bpe); everyone else uses load / from_json_text.
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl);

 private:
  std::shared_ptr<const TokenizerImpl> impl_;
  std::optional<int32_t> bos_override_, eos_override_;
};

}  // namespace nemotron::data
