#include <gtest/gtest.h>

#include "engine/request_codec.h"

namespace nemotron::engine {
namespace {

// Expert-parallel generate hands rank 0 every data rank's results this way: every field comes
// back exactly, text that is not valid UTF-8 (a cut inside a character) included.
TEST(ResultCodec, round_trips_every_field_exactly) {
  Result r;
  r.id = 7, r.tag = 3;
  r.prompt = {1, 2, 3};
  r.tokens = {9, 0, 41};
  r.logprobs = {-0.1f, -1e-7f, -23.456789f};
  r.raw_logprobs = {-0.2f, -3.0f, -1.0f / 3.0f};
  r.finish = FinishReason::stop_token;
  r.text = std::string("ab\xE2\x82", 4);
  const Result back = result_from_json(nlohmann::json::parse(result_to_json(r).dump()));
  EXPECT_EQ(back.id, r.id);
  EXPECT_EQ(back.tag, r.tag);
  EXPECT_EQ(back.prompt, r.prompt);
  EXPECT_EQ(back.tokens, r.tokens);
  EXPECT_EQ(back.logprobs, r.logprobs);
  EXPECT_EQ(back.raw_logprobs, r.raw_logprobs);
  EXPECT_EQ(back.finish, r.finish);
  EXPECT_EQ(back.text, r.text);
}

}  // namespace
}  // namespace nemotron::engine
