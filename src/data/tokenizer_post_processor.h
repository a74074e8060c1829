// Post-processors: what `encode(text, add_special_tokens=true)` wraps around the ids. Supports
// Hugging Face `TemplateProcessing` (the single-sequence template), `BertProcessing` /
// `RobertaProcessing` ([cls] $A [sep]), `ByteLevel` (offsets only: no effect on ids) and
// `Sequence` of these. With add_special_tokens=false nothing is added, as in HF.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/tokenizer_json.h"

namespace nemotron::data {

class PostProcessor {
 public:
  PostProcessor() = default;  // none
  // `node` is tokenizer.json's "post_processor" value (null = none); `at` its location.
  static PostProcessor from_json(const nlohmann::json& node, const JsonAt& at);

  // ids -> ids with the special tokens of every template, applied in order.
  std::vector<int32_t> apply(std::vector<int32_t> ids) const;
  // The id right before / right after the sequence in the first template, if any.
  std::optional<int32_t> template_bos() const { return bos_; }
  std::optional<int32_t> template_eos() const { return eos_; }
  const nlohmann::json& to_json() const { return spec_; }

 private:
  static constexpr int32_t kSequence = -1;  // the place of the encoded text in a template
  void add(const nlohmann::json& node, const JsonAt& at);
  void add_template(std::vector<int32_t> items);

  nlohmann::json spec_;
  std::vector<std::vector<int32_t>> templates_;  // special ids and kSequence, in order
  std::optional<int32_t> bos_, eos_;
};

}  // namespace nemotron::data
