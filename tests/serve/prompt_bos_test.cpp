// One BOS rule (data/prompt_encoding.h) for eval, serve and generate: for the same text, eval's
// scoring request and the server's completion prompt (and /tokenize) are the same ids, with the
// tokenizer's template BOS when its post-processor adds one and none otherwise, even when the
// vocabulary has a token named <s> (eval used to add it by name; the server did not).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/prompt_encoding.h"
#include "eval/task_scoring.h"
#include "serve/job_builder.h"
#include "test_util.h"

namespace nemotron::serve {
namespace {

std::string fixture_json() {
  std::ifstream in(nemotron::testing::source_root().string() + "/tests/fixtures/hf/dense/tokenizer.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The fixture with a post-processor that puts <s> before the text (as Llama-style tokenizers do).
data::Tokenizer with_bos_template() {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(fixture_json());
  const int32_t bos = *data::Tokenizer::from_json_text(fixture_json()).token_to_id("<s>");
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                         {"pair", {{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {bos}}, {"tokens", {"<s>"}}}}}}};
  return data::Tokenizer::from_json_text(j.dump());
}

std::vector<int32_t> served_ids(const data::Tokenizer& tok, const std::string& text) {
  ServedModel m;
  m.name = "tiny";
  m.tok = &tok;
  m.max_model_len = 4096;
  m.vocab_size = tok.vocab_size();
  const nlohmann::json body = {{"prompt", text}, {"max_tokens", 1}};
  const std::vector<int32_t> ids = prepare_completion(m, parse_completion_request(body.dump())).choices[0].job.prompt;
  EXPECT_EQ(tokenize(m, parse_tokenize_request(nlohmann::json{{"prompt", text}}.dump())), ids) << "/tokenize";
  return ids;
}

TEST(PromptBos, EvalAndServeGiveTheSameIdsForTheSamePrompt) {
  const data::Tokenizer plain = data::Tokenizer::from_json_text(fixture_json()), templated = with_bos_template();
  const int32_t s = *plain.token_to_id("<s>");
  for (const data::Tokenizer* tok : {&plain, &templated}) {
    const eval::LoglikelihoodModel ll{nullptr, tok, 2048, 0, data::prompt_bos(*tok)};
    const train::ContinuationRequest req = eval::continuation_request(ll, "The answer is", " 4");
    const std::vector<int32_t> served = served_ids(*tok, "The answer is 4");
    EXPECT_EQ(req.tokens, served);
    EXPECT_EQ(data::encode_prompt(*tok, "The answer is 4"), served);  // what generate runs
  }
  EXPECT_NE(served_ids(plain, "The answer is 4").front(), s) << "no template BOS: none added, <s> in the vocabulary or not";
  EXPECT_EQ(served_ids(templated, "The answer is 4").front(), s);
  EXPECT_EQ(plain.bos_token_id(), s) << "the name fallback still finds <s> (pretraining data prep's add_bos uses it)";
}

}  // namespace
}  // namespace nemotron::serve
