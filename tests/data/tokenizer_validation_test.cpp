// Every way a tokenizer.json (or a training config) can be rejected, with the exact message: the
// file, the JSON path, what was expected and what was found.
#include <gtest/gtest.h>

#include "data/bpe_trainer.h"
#include "tokenizer_test_util.h"

namespace nemotron::data {
namespace {

using namespace testing;

std::string load_error(const json& j) {
  return input_error([&] { Tokenizer::from_json_text(j.dump(), "tok.json"); });
}

json valid() { return tokenizer_json(bpe_model({"a", "b", "ab"}, {"a b"})); }

TEST(TokenizerValidation, malformed_json_and_missing_files) {
  EXPECT_EQ(input_error([] { Tokenizer::from_json_text("{\"model\": ", "tok.json"); }).rfind("tok.json: JSON ", 0), 0u);
  EXPECT_EQ(input_error([] { Tokenizer::load("/no/such/tokenizer.json"); }), "/no/such/tokenizer.json: cannot open file");
  EXPECT_EQ(input_error([] { Tokenizer::from_json_text("[1, 2]", "tok.json"); }),
            "tok.json: expected a tokenizer.json mapping, got [1,2]");
}

TEST(TokenizerValidation, missing_keys) {
  json j = valid();
  j.erase("model");
  EXPECT_EQ(load_error(j), "tok.json: model: missing");
  j = valid();
  j["model"].erase("vocab");
  EXPECT_EQ(load_error(j), "tok.json: model.vocab: missing");
  j = valid();
  j["model"].erase("merges");
  EXPECT_EQ(load_error(j), "tok.json: model.merges: missing");
  j = valid();
  j["added_tokens"] = json::array({{{"id", 3}, {"special", true}}});
  EXPECT_EQ(load_error(j), "tok.json: added_tokens[0].content: missing");
  j["added_tokens"] = json::array({{{"content", "<s>"}, {"special", true}}});
  EXPECT_EQ(load_error(j), "tok.json: added_tokens[0].id: missing");
}

TEST(TokenizerValidation, bad_vocab) {
  json j = valid();
  j["model"]["vocab"]["a"] = "1";
  EXPECT_EQ(load_error(j), "tok.json: model.vocab.\"a\": expected a token id (an integer in [0, 2^31)), got \"1\"");
  j = valid();
  j["model"]["vocab"]["b"] = 0;
  EXPECT_EQ(load_error(j), "tok.json: model.vocab: id 0 is given to both \"a\" and \"b\"");
  j = valid();
  j["model"]["vocab"] = json::array({"a", "b"});
  EXPECT_EQ(load_error(j), "tok.json: model.vocab: expected a mapping {\"token\": id, ...}, got [\"a\",\"b\"]");
}

TEST(TokenizerValidation, bad_merges) {
  json j = valid();
  j["model"]["merges"] = json::array({"a b", 42});
  EXPECT_EQ(load_error(j), "tok.json: model.merges[1]: expected \"a b\" or [\"a\",\"b\"], got 42");
  j["model"]["merges"] = json::array({json::array({"a"})});
  EXPECT_EQ(load_error(j), "tok.json: model.merges[0]: expected \"a b\" or [\"a\",\"b\"], got [\"a\"]");
  j["model"]["merges"] = json::array({"a b c"});
  EXPECT_EQ(load_error(j),
            "tok.json: model.merges[0]: expected \"a b\" (two tokens separated by one space), got \"a b c\"");
  j["model"]["merges"] = json::array({"a b", "x b"});
  EXPECT_EQ(load_error(j), "tok.json: model.merges[1]: token \"x\" is not in model.vocab");
  j["model"]["merges"] = json::array({json::array({"b", "a"})});
  EXPECT_EQ(load_error(j), "tok.json: model.merges[0]: merged token \"ba\" is not in model.vocab");
  j["model"]["merges"] = "a b";
  EXPECT_EQ(load_error(j), "tok.json: model.merges: expected a list of merges, got \"a b\"");
}

TEST(TokenizerValidation, unsupported_components) {
  json j = valid();
  j["model"]["type"] = "WordPiece";
  EXPECT_EQ(load_error(j), "tok.json: model.type: unsupported model \"WordPiece\" (supported: BPE)");
  j = valid();
  j["model"]["dropout"] = 0.1;
  EXPECT_EQ(load_error(j),
            "tok.json: model.dropout: BPE dropout is not supported (encoding must be deterministic), got 0.1");
  j = valid();
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(load_error(j),
            "tok.json: normalizer.type: unsupported normalizer \"NFC\" (only tokenizers without a normalizer are "
            "supported)");
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array()}};
  EXPECT_NO_THROW(Tokenizer::from_json_text(j.dump(), "tok.json"));
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFKC"}}})}};
  EXPECT_EQ(load_error(j),
            "tok.json: normalizer.normalizers[0]: unsupported normalizer \"NFKC\" (only tokenizers without a "
            "normalizer are supported)");
  j = valid();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers", json::array({split_pretokenizer("a"), {{"type", "Metaspace"}}})}};
  EXPECT_EQ(load_error(j),
            "tok.json: pre_tokenizer.pretokenizers[1].type: unsupported pre-tokenizer \"Metaspace\" (supported: "
            "Split, ByteLevel, Sequence)");
  j = valid();
  j["decoder"] = {{"type", "Metaspace"}};
  EXPECT_EQ(load_error(j), "tok.json: decoder.type: unsupported decoder \"Metaspace\" (supported: ByteLevel, or null)");
  j = valid();
  j["post_processor"] = {{"type", "Unigram"}};
  EXPECT_EQ(load_error(j),
            "tok.json: post_processor.type: unsupported post-processor \"Unigram\" (supported: TemplateProcessing, "
            "BertProcessing, RobertaProcessing, ByteLevel, Sequence)");
  j = valid();
  j["version"] = "2.0";
  EXPECT_EQ(load_error(j), "tok.json: version: unsupported tokenizer.json version \"2.0\" (expected \"1.0\")");
}

TEST(TokenizerValidation, bad_split) {
  json j = valid();
  j["pre_tokenizer"] = split_pretokenizer("(a");
  EXPECT_EQ(load_error(j).rfind("tok.json: pre_tokenizer.pattern.Regex: invalid regex \"(a\": missing closing parenthesis", 0),
            0u)
      << load_error(j);
  j["pre_tokenizer"] = split_pretokenizer("a", "Dropped");
  EXPECT_EQ(load_error(j),
            "tok.json: pre_tokenizer.behavior: expected one of Removed, Isolated, MergedWithPrevious, "
            "MergedWithNext, Contiguous, got \"Dropped\"");
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Glob", "*"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(load_error(j),
            "tok.json: pre_tokenizer.pattern: expected {\"Regex\": \"...\"} or {\"String\": \"...\"}, got "
            "{\"Glob\":\"*\"}");
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", "yes"}};
  EXPECT_EQ(load_error(j), "tok.json: pre_tokenizer.add_prefix_space: expected true or false, got \"yes\"");
}

TEST(TokenizerValidation, bad_template) {
  json j = valid();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", "<s> $A"},
                         {"special_tokens", json::object()}};
  EXPECT_EQ(load_error(j),
            "tok.json: post_processor.single[0]: special token \"<s>\" is missing from post_processor.special_tokens");
  j["post_processor"]["single"] = json::array({{{"Sequence", {{"id", "C"}, {"type_id", 0}}}}});
  EXPECT_EQ(load_error(j), "tok.json: post_processor.single[0].Sequence.id: expected \"A\" or \"B\", got \"C\"");
  j["post_processor"]["single"] = "$B";
  EXPECT_EQ(load_error(j),
            "tok.json: post_processor.single[0]: the single-sequence template refers to a second sequence ($B)");
  j["post_processor"]["single"] = "<s> $A";
  j["post_processor"]["special_tokens"] = {{"<s>", {{"id", "<s>"}, {"ids", json::array({-1})}}}};
  EXPECT_EQ(load_error(j),
            "tok.json: post_processor.special_tokens.\"<s>\".ids[0]: expected a token id (an integer in [0, 2^31)), "
            "got -1");
}

TEST(TokenizerValidation, unk_token_missing_is_an_error_only_when_needed) {
  json j = valid();
  j["model"]["unk_token"] = "<unk>";
  const Tokenizer t = make(j);
  EXPECT_EQ(t.encode("ab"), (std::vector<int32_t>{2}));
  EXPECT_EQ(input_error([&] { t.encode("abc"); }),
            "BPE model: unk_token \"<unk>\" is not in the vocabulary, and the word \"abc\" needs it");
}

TEST(TokenizerValidation, train_config) {
  BpeTrainConfig cfg;
  cfg.vocab_size = 0;
  EXPECT_EQ(input_error([&] { train_bpe({"x"}, cfg); }), "train_bpe: vocab_size: expected a positive integer, got 0");
  cfg = BpeTrainConfig();
  cfg.min_frequency = -1;
  EXPECT_EQ(input_error([&] { train_bpe({"x"}, cfg); }),
            "train_bpe: min_frequency: expected a non-negative integer, got -1");
  cfg = BpeTrainConfig();
  cfg.special_tokens = {"<s>", ""};
  EXPECT_EQ(input_error([&] { train_bpe({"x"}, cfg); }),
            "train_bpe: special_tokens[1]: expected a non-empty UTF-8 string, got \"\"");
  cfg = BpeTrainConfig();
  cfg.bos_token = "<s>";
  EXPECT_EQ(input_error([&] { train_bpe({"x"}, cfg); }), "train_bpe: bos_token: \"<s>\" is not one of special_tokens");
  cfg = BpeTrainConfig();
  cfg.pattern = "[a";
  EXPECT_EQ(input_error([&] { train_bpe({"x"}, cfg); }).rfind("train_bpe: pattern: invalid regex \"[a\": ", 0), 0u);
  cfg = BpeTrainConfig();
  EXPECT_EQ(input_error([&] { train_bpe({"ok", "bad\xC0"}, cfg); }), "train_bpe: texts[1] is not valid UTF-8 (byte 3)");
}

}  // namespace
}  // namespace nemotron::data
