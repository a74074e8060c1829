// The SFT chunker against NVIDIA-NeMo/Nemotron's current data prep: every expected chunk list in
// tests/fixtures/jinja/expected.json ("chunks") was cut by its core/chat_template.py itself
// (replace_json_args, create_masked_messages, split_system_user_chunks) from nano3.jinja rendered
// by jinja2 as transformers renders it (tools/make_jinja_fixtures.py --nemotron). The named tests
// pin the rules its commits 0a3f6b6 and 91958ce changed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"

#include "data/chat_template.h"
#include "data/data_test_util.h"
#include "data/sft_conversation.h"
#include "test_util.h"

namespace nemotron::data {
namespace {

const OrderedJson& expected() {
  static const OrderedJson e = OrderedJson::parse(testing::read_text(nemotron::testing::source_root().string() + "/tests/fixtures/jinja/expected.json"));
  return e;
}

const OrderedJson& input_case(const std::string& name) {
  static const OrderedJson cases = OrderedJson::parse(testing::read_text(nemotron::testing::source_root().string() + "/tests/fixtures/jinja/cases.json"));
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

// Nemotron's issue #184 (its open PR #329): a template whose generation prompt ends in whitespace
// the assistant turn does not start with. The strict prefix check fails; the right-stripped
// render is a prefix, and the chunks still add up to the whole text.
TEST(SftConversation, trailing_whitespace_after_the_generation_prompt_is_realigned) {
  const OrderedJson msgs = OrderedJson::parse(R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}])");
  for (const std::string extra : {"\n", ""}) {
    const ChatTemplate t = ChatTemplate::from_jinja(
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n" + extra + "{% endif %}",
        "issue184.jinja", OrderedJson::object());
    const auto seqs = chat_training_chunks(t, msgs, nullptr);
    ASSERT_EQ(seqs.size(), 1u);
    ASSERT_EQ(seqs[0].size(), 2u);
    EXPECT_EQ(seqs[0][0].role, "user");
    EXPECT_EQ(seqs[0][0].text + seqs[0][1].text, t.render(msgs, nullptr));
    // Re-aligned: the chunk ends before the stripped "\n"; clean: boundaries as before.
    EXPECT_EQ(seqs[0][1].text, extra.empty() ? "Hello<|im_end|>\n" : "\nHello<|im_end|>\n") << "extra=" << extra.size();
  }
}

// The chunker is the template's, not nano3's: nano3.jinja through the interpreter cuts every case
// exactly as the built-in renderer does.
TEST(SftConversation, a_jinja_template_is_cut_like_the_builtin_it_equals) {
  const ChatTemplate jinja = ChatTemplate::load(nemotron::testing::source_root().string() + "/tests/fixtures/jinja/nano3.jinja");
  ASSERT_FALSE(jinja.builtin());
  for (const OrderedJson& c : expected().at("chunks")) {
    const OrderedJson& in = input_case(c.at("case"));
    const OrderedJson tools = in.contains("tools") ? in["tools"] : OrderedJson();
    std::vector<std::vector<ChatChunk>> a, b;
    bool a_failed = false, b_failed = false;
    try { a = chat_training_chunks(jinja, in.at("messages"), tools); } catch (const ChatTemplateError&) { a_failed = true; }
    try { b = chat_training_chunks(ChatFormat::nano3, in.at("messages"), tools); } catch (const ChatTemplateError&) { b_failed = true; }
    ASSERT_EQ(a_failed, b_failed) << c.at("case");
    ASSERT_EQ(a.size(), b.size()) << c.at("case");
    for (size_t s = 0; s < a.size(); ++s) {
      ASSERT_EQ(a[s].size(), b[s].size()) << c.at("case");
      for (size_t k = 0; k < a[s].size(); ++k) {
        EXPECT_EQ(a[s][k].role, b[s][k].role);
        EXPECT_EQ(a[s][k].text, b[s][k].text);
      }
    }
  }
}

std::string error_of(const std::string& spec) {
  try {
    ChatTemplate::load(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "loaded";
}

TEST(ChatTemplateLoad, reads_jinja_files_tokenizer_configs_and_checkpoint_directories) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("chat_template_load_" + std::to_string(::getpid()));
  fs::create_directories(dir / "ckpt");
  const auto write = [](const fs::path& p, const std::string& text) { std::ofstream(p) << text; };
  write(dir / "ckpt" / "tokenizer_config.json",
        R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
            "chat_template": "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}"})");
  const OrderedJson msgs = OrderedJson::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(ChatTemplate::load((dir / "ckpt").string()).render(msgs, nullptr), "<s>[user] hi</s>");
  EXPECT_EQ(ChatTemplate::load((dir / "ckpt" / "tokenizer_config.json").string()).render(msgs, nullptr), "<s>[user] hi</s>");
  // chat_template.jinja in the directory wins, with the config's special tokens.
  write(dir / "ckpt" / "chat_template.jinja", "{{ bos_token }}jinja file\n");
  EXPECT_EQ(ChatTemplate::load((dir / "ckpt").string()).render(msgs, nullptr), "<s>jinja file");
  EXPECT_EQ(ChatTemplate::load("nano-v2").builtin(), ChatFormat::nano_v2);

  EXPECT_EQ(error_of("chatml"), "chat template \"chatml\": not a built-in (nano3, nemotron-h, nano-v2) and no such file or directory");
  fs::create_directories(dir / "empty");
  EXPECT_EQ(error_of((dir / "empty").string()), (dir / "empty").string() + ": holds neither chat_template.jinja nor tokenizer_config.json");
  write(dir / "no_template.json", R"({"bos_token": "<s>"})");
  EXPECT_EQ(error_of((dir / "no_template.json").string()), (dir / "no_template.json").string() + ": no \"chat_template\" key");
  write(dir / "bad.jinja", "ok\n{% for %}");
  EXPECT_EQ(error_of((dir / "bad.jinja").string()), (dir / "bad.jinja").string() + ":2: expected a name, got end of statement block");
  // A render error names the template file and line.
  write(dir / "raises.jinja", "line one\n{{ raise_exception('no system turn') }}");
  try {
    ChatTemplate::load((dir / "raises.jinja").string()).render(msgs, nullptr);
    ADD_FAILURE() << "rendered";
  } catch (const ChatTemplateError& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "raises.jinja").string() + ":2: no system turn");
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nemotron::data
