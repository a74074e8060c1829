// The SFT chunker against NVIDIA-NeMo/Nemotron's current data prep: every expected chunk list in
// tests/fixtures/jinja/expected.json ("chunks") was cut by its core/chat_template.py itself
// (replace_json_args, create_masked_messages, split_system_user_chunks) from nano3.jinja rendered
// by jinja2 as transformers renders it (tools/make_jinja_fixtures.py --nemotron). The named tests
// pin the rules its commits 0a3f6b6 and 91958ce changed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/data_test_util.h"
#include "data/sft_conversation.h"

namespace nemotron::data {
namespace {

const OrderedJson& expected() {
  static const OrderedJson e = OrderedJson::parse(testing::read_text(NEMOTRON_SOURCE_DIR "/tests/fixtures/jinja/expected.json"));
  return e;
}

const OrderedJson& input_case(const std::string& name) {
  static const OrderedJson cases = OrderedJson::parse(testing::read_text(NEMOTRON_SOURCE_DIR "/tests/fixtures/jinja/cases.json"));
  for (const OrderedJson& c : cases)
    if (c.at("name") == name) return c;
  throw std::runtime_error("no case " + name);
}

const OrderedJson& nemotron_chunks(const std::string& name) {
  for (const OrderedJson& c : expected().at("chunks"))
    if (c.at("case") == name) return c;
  throw std::runtime_error("no chunks for " + name);
}

std::vector<std::vector<ChatChunk>> ours(const std::string& name) {
  const OrderedJson& c = input_case(name);
  return chat_training_chunks(ChatFormat::nano3, c.at("messages"), c.contains("tools") ? c["tools"] : OrderedJson());
}

// Our chunks equal Nemotron's, or both refuse the row.
void expect_like_nemotron(const std::string& name) {
  const OrderedJson& want = nemotron_chunks(name);
  if (want.contains("error")) {
    EXPECT_THROW(ours(name), ChatTemplateError) << name << ": Nemotron: " << want["error"];
    return;
  }
  const auto got = ours(name);
  const OrderedJson& seqs = want.at("sequences");
  ASSERT_EQ(got.size(), seqs.size()) << name;
  for (size_t s = 0; s < got.size(); ++s) {
    ASSERT_EQ(got[s].size(), seqs[s].size()) << name << " sequence " << s;
    for (size_t k = 0; k < got[s].size(); ++k) {
      EXPECT_EQ(got[s][k].role, seqs[s][k][0].get<std::string>()) << name << " sequence " << s << " chunk " << k;
      EXPECT_EQ(got[s][k].text, seqs[s][k][1].get<std::string>()) << name << " sequence " << s << " chunk " << k;
    }
  }
}

TEST(SftConversation, every_fixture_case_is_cut_as_nemotron_cuts_it) {
  ASSERT_GE(expected().at("chunks").size(), 15u);
  for (const OrderedJson& c : expected().at("chunks")) expect_like_nemotron(c.at("case"));
}

// 91958ce: a sub-sequence ending on a user turn (consecutive user turns, or a conversation that
// ends on one) is skipped; the row was dropped whole before.
TEST(SftConversation, consecutive_user_turns_with_reasoning_keep_the_trainable_subsequences) {
  expect_like_nemotron("consecutive_users_reasoning");
  expect_like_nemotron("ends_on_user_with_reasoning");
  EXPECT_EQ(ours("consecutive_users_reasoning").size(), 2u);
  EXPECT_EQ(ours("ends_on_user_with_reasoning").size(), 1u);
}

// 91958ce: the generation prompt belongs to a user turn only when an assistant turn follows.
TEST(SftConversation, user_user_assistant_without_reasoning_is_kept) {
  expect_like_nemotron("consecutive_users_plain");
  const auto seqs = ours("consecutive_users_plain");
  ASSERT_EQ(seqs.size(), 1u);
  ASSERT_EQ(seqs[0].size(), 4u);  // system, user (no prompt), user + prompt, assistant
  EXPECT_EQ(seqs[0][1].text, "<|im_start|>user\nHello.<|im_end|>\n");
  EXPECT_EQ(seqs[0][3].text, "2<|im_end|>\n");
}

// 0a3f6b6: reasoning that renders empty (null, whitespace only) puts "<think></think>" in the
// context chunk; the trained chunk is the answer alone.
TEST(SftConversation, whitespace_or_null_reasoning_trains_only_the_answer) {
  for (const char* name : {"last_reasoning_whitespace", "last_reasoning_null"}) {
    expect_like_nemotron(name);
    const auto seqs = ours(name);
    ASSERT_EQ(seqs.size(), 2u) << name;
    const std::vector<ChatChunk>& last = seqs[1];
    ASSERT_EQ(last.size(), 3u) << name;
    EXPECT_TRUE(last[1].text.ends_with("<|im_start|>assistant\n<think></think>")) << name << ": " << last[1].text;
    EXPECT_EQ(last[2].role, "assistant");
    EXPECT_EQ(last[2].text, "9<|im_end|>\n") << name;
  }
}

}  // namespace
}  // namespace nemotron::data
