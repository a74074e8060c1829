#include <gtest/gtest.h>

#include "data/rl_rows.h"

namespace nemotron::data {
namespace {

OrderedJson parse(const char* s) { return OrderedJson::parse(s); }

TEST(RlRows, gym_rows_are_kept_and_get_the_source_and_agent_defaults) {
  RlRowOptions opts;
  opts.task_name = "math";
  opts.agent_name = "math_agent";
  RlRowResult r = convert_rl_row(parse(R"({"responses_create_params": {"input": "What is 1+1?", "temperature": 0.7},
                                          "expected_answer": "\"2\"", "extra": 1})"),
                                 opts);
  ASSERT_TRUE(r.row) << r.detail;
  EXPECT_EQ(r.kind, "gym");
  EXPECT_EQ((*r.row)["expected_answer"], "2");  // JSON-encoded answer decoded
  EXPECT_EQ((*r.row)["extra"], 1);
  EXPECT_EQ((*r.row)["task_name"], "math");
  EXPECT_EQ((*r.row)["agent_ref"]["name"], "math_agent");
  // An agent_ref already there is kept.
  r = convert_rl_row(parse(R"({"responses_create_params": {"input": "x"}, "agent_ref": {"name": "own"}})"), opts);
  EXPECT_EQ((*r.row)["agent_ref"]["name"], "own");
}

TEST(RlRows, gym_rows_with_bad_create_params_are_dropped_with_the_reason) {
  auto reason = [](const char* row) {
    RlRowResult r = convert_rl_row(parse(row), {});
    EXPECT_FALSE(r.row);
    return r.detail;
  };
  EXPECT_EQ(reason(R"({"responses_create_params": {"input": []}})"),
            "responses_create_params.input: expected a string or a non-empty list of items");
  EXPECT_EQ(reason(R"({"responses_create_params": {"input": [{"role": "robot", "content": "x"}]}})"),
            "responses_create_params.input[0]: role must be user, assistant, system or developer");
  EXPECT_EQ(reason(R"({"responses_create_params": {"input": [{"type": "image", "url": "x"}]}})"),
            "responses_create_params.input[0]: unknown item type \"image\"");
  EXPECT_EQ(reason(R"({"responses_create_params": {"messages": []}})"),
            "responses_create_params: unknown key \"messages\" (NeMo Gym accepts only the Responses API's)");
  EXPECT_EQ(reason(R"({"responses_create_params": {"temperature": 1}})"), "responses_create_params: missing \"input\"");
}

TEST(RlRows, plain_rows_use_the_prompt_template_system_prompt_and_keys) {
  RlRowOptions opts;
  opts.input_key = "problem";
  opts.output_key = "solution";
  opts.prompt_template = "Think step by step: {} Put the answer in \\boxed{}.";
  opts.system_prompt = "You are a mathematician.";
  RlRowResult r = convert_rl_row(parse(R"({"problem": "2+2?", "solution": 4, "id": 9})"), opts);
  ASSERT_TRUE(r.row) << r.detail;
  EXPECT_EQ(r.kind, "plain");
  EXPECT_EQ(r.row->dump(), R"({"responses_create_params":{"input":[{"role":"system","content":"You are a mathematician."},)"
                           R"({"role":"user","content":"Think step by step: 2+2? Put the answer in \\boxed{}."}]},)"
                           R"("question":"2+2?","expected_answer":"4","id":9})");
  r = convert_rl_row(parse(R"({"problem": "2+2?"})"), opts);
  EXPECT_FALSE(r.row);
  EXPECT_EQ(r.drop_reason, "no expected answer");
}

TEST(RlRows, messages_rows_take_the_first_assistant_turn_as_the_answer) {
  RlRowResult r = convert_rl_row(parse(R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"},
                                                       {"role": "user", "content": "later"}]})"),
                                 {});
  ASSERT_TRUE(r.row);
  EXPECT_EQ((*r.row)["expected_answer"], "A");
  EXPECT_EQ((*r.row)["responses_create_params"]["input"].size(), 1u);
  r = convert_rl_row(parse(R"({"messages": [{"role": "user", "content": "Q"}]})"), {});
  EXPECT_EQ(r.drop_reason, "no expected answer");
  r = convert_rl_row(parse(R"({"messages": [{"role": "assistant", "content": "A"}]})"), {});
  EXPECT_EQ(r.drop_reason, "no prompt");
}

TEST(RlRows, placeholders_are_resolved_only_when_the_row_carries_its_data) {
  RlRowResult r = convert_rl_row(parse(R"({"_hf_placeholder": {"row": 3, "question_template": "Q: {}"}, "problem": "1+2", "answer": "3"})"), {});
  ASSERT_TRUE(r.row) << r.detail;
  EXPECT_EQ(r.kind, "placeholder");
  EXPECT_FALSE(r.row->contains("_hf_placeholder"));
  EXPECT_EQ((*r.row)["responses_create_params"]["input"][0]["content"], "Q: 1+2");
  EXPECT_EQ((*r.row)["question"], "1+2");
  EXPECT_EQ((*r.row)["expected_answer"], "3");
  r = convert_rl_row(parse(R"({"_hf_placeholder": {"row": 3, "question_template": "{question}"}, "dataset": "DAPO"})"), {});
  EXPECT_FALSE(r.row);
  EXPECT_EQ(r.drop_reason, "placeholder without its data");
}

}  // namespace
}  // namespace nemotron::data
