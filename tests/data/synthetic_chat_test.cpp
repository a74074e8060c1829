// The bundled chat data: deterministic, every template path present, rows that template cleanly,
// held-out prompts disjoint from the rows with answers that match their reference solutions.
#include <gtest/gtest.h>

#include <set>

#include "data/chat_template.h"
#include "data/corpus_skills.h"
#include "data/sft_conversation.h"
#include "data/synthetic_chat.h"

namespace nemotron::data {
namespace {

TEST(SyntheticChat, rows_are_deterministic_and_cover_every_template_path) {
  CorpusConfig cfg;
  cfg.first_problem = 1000000;
  cfg.num_examples = 2000;
  const std::vector<OrderedJson> rows = generate_chat_rows(cfg);
  ASSERT_EQ(rows.size(), 2000u);
  EXPECT_EQ(rows, generate_chat_rows(cfg));
  int system = 0, two_turns = 0, reasoning = 0, calls = 0, parallel = 0, schema = 0, other_tag = 0;
  for (const OrderedJson& row : rows) {
    int users = 0, results = 0;
    for (const OrderedJson& m : row["messages"]) {
      system += m["role"] == "system";
      users += m["role"] == "user";
      results += m["role"] == "tool";
      reasoning += m.contains("reasoning_content");
    }
    two_turns += users == 2;
    calls += results == 1;
    parallel += results == 2;
    schema += row.contains("tools");
    other_tag += row["used_in"] != kChatUsedIn;
    // Every row templates and cuts cleanly (no drop reason but the used_in tag).
    SftRowOptions opt;
    OrderedJson messages = row["messages"];
    for (OrderedJson& m : messages)
      if (m.contains("tool_calls"))
        for (OrderedJson& c : m["tool_calls"]) c["function"]["arguments"] = OrderedJson::parse(c["function"]["arguments"].get<std::string>());
    EXPECT_NO_THROW(chat_training_chunks(ChatFormat::nano3, messages, row.contains("tools") ? row["tools"] : OrderedJson()));
  }
  EXPECT_GT(system, 300);
  EXPECT_GT(two_turns, 200);
  EXPECT_GT(reasoning, 100);
  EXPECT_GT(calls, 50);
  EXPECT_GT(parallel, 5);
  EXPECT_GT(schema, 3);
  EXPECT_GT(other_tag, 10);
  EXPECT_LT(other_tag, 100);
}

TEST(SyntheticChat, heldout_prompts_are_new_problems_with_checked_answers) {
  CorpusConfig cfg;
  cfg.first_problem = 1000000;
  cfg.num_examples = 500;
  std::set<std::string> seen;
  for (const OrderedJson& row : generate_chat_rows(cfg))
    for (const OrderedJson& m : row["messages"])
      if (m["role"] == "user") seen.insert(m["content"].get<std::string>());
  int repeats = 0;
  for (const OrderedJson& h : generate_chat_heldout(cfg, 100)) {
    ASSERT_EQ(h["messages"].size(), 1u);
    repeats += seen.count(h["messages"][0]["content"].get<std::string>()) > 0;
    const auto answer = extract_final_answer(h["reference"].get<std::string>());
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(std::to_string(*answer), h["answer"].get<std::string>());
  }
  EXPECT_LT(repeats, 10);  // only coincidences of small problems ("What is 2 + 3?") can repeat
}

}  // namespace
}  // namespace nemotron::data
