// The chat templates and the assistant-only mask against the Python stack: every expected text
// below was produced by NVIDIA-NeMo/Nemotron's templates/nano3.jinja rendered with jinja2 3.1 as HF
// apply_chat_template renders (trim_blocks, lstrip_blocks, tojson = json.dumps), and every chunk
// list by its data prep's create_masked_messages + split_system_user_chunks on the same rows.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/sft_conversation.h"
#include "tokenizer_test_util.h"

namespace nemotron::data {
namespace {

using testing::added_token;
using testing::bpe_model;
using testing::byte_level_pretokenizer;
using testing::byte_level_tokens;
using testing::json;
using testing::tokenizer_json;

struct Case {
  const char* name;
  const char* row;  // {"messages": [...], "tools": [...]} as the input row has them
  ChatRenderOptions opt;
  std::string rendered;
  std::vector<std::vector<std::pair<std::string, std::string>>> sequences;  // (role, text) chunks
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
    {"plain",
     R"json({"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "2 + 3 = 5.\nThe answer is 5."}]})json",
     {false, true, true, std::nullopt},
     "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n<think></think>2 + 3 = 5.\nThe answer is 5.<|im_end|>\n",
     {{{"system", "<|im_start|>system\n<|im_end|>\n"}, {"user", "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n<think></think>"}, {"assistant", "2 + 3 = 5.\nThe answer is 5.<|im_end|>\n"}}}},
    {"system_two_turns",
     R"json({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "The answer is 5.  "}, {"role": "user", "content": "And 4 * 2?"}, {"role": "assistant", "content": "The answer is 8."}]})json",
     {false, true, true, std::nullopt},
     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n<think></think>The answer is 5.<|im_end|>\n<|im_start|>user\nAnd 4 * 2?<|im_end|>\n<|im_start|>assistant\n<think></think>The answer is 8.<|im_end|>\n",
     {{{"system", "<|im_start|>system\nBe brief.<|im_end|>\n"}, {"user", "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n<think></think>"}, {"assistant", "The answer is 5.<|im_end|>\n"}, {"user", "<|im_start|>user\nAnd 4 * 2?<|im_end|>\n<|im_start|>assistant\n<think></think>"}, {"assistant", "The answer is 8.<|im_end|>\n"}}}},
    {"reasoning_two_turns",
     R"json({"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "The answer is 5.", "reasoning_content": "2 + 3 = 5."}, {"role": "user", "content": "And 4 * 2?"}, {"role": "assistant", "content": "The answer is 8.", "reasoning_content": "4 * 2 = 8."}]})json",
     {false, true, true, std::nullopt},
     "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n<think></think>\nThe answer is 5.<|im_end|>\n<|im_start|>user\nAnd 4 * 2?<|im_end|>\n<|im_start|>assistant\n<think>\n4 * 2 = 8.\n</think>\nThe answer is 8.<|im_end|>\n",
     {{{"system", "<|im_start|>system\n<|im_end|>\n"}, {"user", "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n<think>\n"}, {"assistant", "2 + 3 = 5.\n</think>\nThe answer is 5.<|im_end|>\n"}},
      {{"system", "<|im_start|>system\n<|im_end|>\n"}, {"user", "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n<think></think>\nThe answer is 5.<|im_end|>\n<|im_start|>user\nAnd 4 * 2?<|im_end|>\n<|im_start|>assistant\n<think>\n"}, {"assistant", "4 * 2 = 8.\n</think>\nThe answer is 8.<|im_end|>\n"}}}},
    {"tools_parallel",
     R"json({"messages": [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "What is (1 + 2) + (3 * 4)?"}, {"role": "assistant", "content": "Both parts first.", "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": "{\"expression\": \"1 + 2\", \"mode\": \"int\"}"}}, {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "3 * 4", "opts": {"a": [1, 2.5, true, null]}, "n": 7, "f": 1.0, "b": false}}}]}, {"role": "tool", "content": "3"}, {"role": "tool", "content": "12"}, {"role": "assistant", "content": "3 + 12 = 15.\nThe answer is 15."}], "tools": [{"type": "function", "function": {"name": "calculator", "description": " Evaluate. ", "parameters": {"type": "object", "properties": {"expression": {"type": "string", "description": "The expression."}, "mode": {"type": ["string", "null"], "enum": ["int", "float"], "default": "int"}}, "required": ["expression"], "additionalProperties": false}}}]})json",
     {false, true, true, std::nullopt},
     "<|im_start|>system\nUse tools.\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n<function>\n<name>calculator</name>\n<description>Evaluate.</description>\n<parameters>\n<parameter>\n<name>expression</name>\n<type>string</type>\n<description>The expression.</description>\n</parameter>\n<parameter>\n<name>mode</name>\n<type>['string', 'null']</type>\n<enum>[\"int\", \"float\"]</enum>\n<default>int</default>\n</parameter>\n<additionalProperties>False</additionalProperties>\n<required>[\"expression\"]</required>\n</parameters>\n</function>\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT><|im_end|>\n<|im_start|>user\nWhat is (1 + 2) + (3 * 4)?<|im_end|>\n<|im_start|>assistant\n<think></think>Both parts first.\n<tool_call>\n<function=calculator>\n<parameter=expression>\n1 + 2\n</parameter>\n<parameter=mode>\nint\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=calculator>\n<parameter=expression>\n3 * 4\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2.5, true, null]}\n</parameter>\n<parameter=n>\n7\n</parameter>\n<parameter=f>\n1.0\n</parameter>\n<parameter=b>\nFalse\n</parameter>\n</function>\n</tool_call>\n<|im_end|>\n<|im_start|>user\n<tool_response>\n3\n</tool_response>\n<tool_response>\n12\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n<think></think>3 + 12 = 15.\nThe answer is 15.<|im_end|>\n",
     {{{"system", "<|im_start|>system\nUse tools.\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n<function>\n<name>calculator</name>\n<description>Evaluate.</description>\n<parameters>\n<parameter>\n<name>expression</name>\n<type>string</type>\n<description>The expression.</description>\n</parameter>\n<parameter>\n<name>mode</name>\n<type>['string', 'null']</type>\n<enum>[\"int\", \"float\"]</enum>\n<default>int</default>\n</parameter>\n<additionalProperties>False</additionalProperties>\n<required>[\"expression\"]</required>\n</parameters>\n</function>\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT><|im_end|>\n"}, {"user", "<|im_start|>user\nWhat is (1 + 2) + (3 * 4)?<|im_end|>\n<|im_start|>assistant\n<think></think>"}, {"assistant", "Both parts first.\n<tool_call>\n<function=calculator>\n<parameter=expression>\n1 + 2\n</parameter>\n<parameter=mode>\nint\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=calculator>\n<parameter=expression>\n3 * 4\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2.5, true, null]}\n</parameter>\n<parameter=n>\n7\n</parameter>\n<parameter=f>\n1.0\n</parameter>\n<parameter=b>\nFalse\n</parameter>\n</function>\n</tool_call>\n<|im_end|>\n"}, {"tool", "<|im_start|>user\n<tool_response>\n3\n</tool_response>\n<tool_response>\n12\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n<think></think>"}, {"assistant", "3 + 12 = 15.\nThe answer is 15.<|im_end|>\n"}}}},
    {"tool_reasoning",
     R"json({"messages": [{"role": "user", "content": "What is 6 * 7?"}, {"role": "assistant", "content": "", "reasoning_content": "Use the calculator.", "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": "{\"expression\": \"6 * 7\"}"}}]}, {"role": "tool", "content": "42"}, {"role": "assistant", "content": "The answer is 42.", "reasoning_content": "The tool said 42."}], "tools": [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]})json",
     {false, true, true, std::nullopt},
     "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n<function>\n<name>calculator</name>\n<parameters>\n<parameter>\n<name>expression</name>\n<type>string</type>\n</parameter>\n</parameters>\n</function>\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT><|im_end|>\n<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n<think>\nUse the calculator.\n</think>\n<tool_call>\n<function=calculator>\n<parameter=expression>\n6 * 7\n</parameter>\n</function>\n</tool_call>\n<|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n<think>\nThe tool said 42.\n</think>\nThe answer is 42.<|im_end|>\n",
     {{{"system", "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n<function>\n<name>calculator</name>\n<parameters>\n<parameter>\n<name>expression</name>\n<type>string</type>\n</parameter>\n</parameters>\n</function>\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT><|im_end|>\n"}, {"user", "<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n<think>\n"}, {"assistant", "Use the calculator.\n</think>\n<tool_call>\n<function=calculator>\n<parameter=expression>\n6 * 7\n</parameter>\n</function>\n</tool_call>\n<|im_end|>\n"}, {"tool", "<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\n<think>\n"}, {"assistant", "The tool said 42.\n</think>\nThe answer is 42.<|im_end|>\n"}}}},
    {"history_truncation",
     R"json({"messages": [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1", "reasoning_content": "R1"}, {"role": "assistant", "content": "<think>x</think>A1b", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}, {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "A2", "reasoning_content": "R2"}]})json",
     {true, true, true, int64_t{128}},
     "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think></think>\nA1<|im_end|>\n<|im_start|>assistant\n<think></think>A1b\n<tool_call>\n<function=f>\n</function>\n</tool_call>\n<|im_end|>\n<|im_start|>user\nQ2\n\n{thinking token budget: 128}<|im_end|>\n<|im_start|>assistant\n<think>\nR2\n</think>\nA2<|im_end|>\n<|im_start|>assistant\n<think>\n",
     {}},
    {"no_thinking_gen",
     R"json({"messages": [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1", "reasoning_content": "R1"}, {"role": "user", "content": null}]})json",
     {true, false, false, std::nullopt},
     "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nR1\n</think>\nA1<|im_end|>\n<|im_start|>user\nNone<|im_end|>\n<|im_start|>assistant\n<think></think>",
     {}},

  };
  return c;
}

// One token per byte plus <|im_start|> and <|im_end|> as single special tokens: a chunk of n bytes
// is n tokens, so a mask can be read back as text.
const Tokenizer& byte_tokenizer() {
  static const Tokenizer tok = testing::make(tokenizer_json(
      bpe_model(byte_level_tokens({"<|im_start|>", "<|im_end|>"}), {}), byte_level_pretokenizer(false, false),
      json::array({added_token(256, "<|im_start|>", true), added_token(257, "<|im_end|>", true)}),
      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}));
  return tok;
}

// The row with tool-call arguments parsed, as data prep hands it to the template.
OrderedJson parsed_messages(const OrderedJson& row) {
  OrderedJson m = row.at("messages");
  for (auto& msg : m)
    if (msg.contains("tool_calls"))
      for (auto& call : msg["tool_calls"])
        if (call["function"]["arguments"].is_string())
          call["function"]["arguments"] = OrderedJson::parse(call["function"]["arguments"].get<std::string>());
  return m;
}

OrderedJson tools_of(const OrderedJson& row) { return row.contains("tools") ? row["tools"] : OrderedJson(nullptr); }

// The decoded text of each run of trained tokens.
std::vector<std::string> trained_runs(const Tokenizer& tok, const MaskedSequence& s) {
  std::vector<std::string> runs;
  std::vector<int32_t> run;
  for (size_t i = 0; i <= s.input_ids.size(); ++i) {
    if (i < s.input_ids.size() && s.loss_mask[i]) {
      run.push_back(s.input_ids[i]);
    } else if (!run.empty()) {
      runs.push_back(tok.decode(run));
      run.clear();
    }
  }
  return runs;
}

TEST(ChatTemplate, nano3_renders_byte_exactly_like_the_jinja_template) {
  for (const Case& c : cases()) {
    const OrderedJson row = OrderedJson::parse(c.row);
    EXPECT_EQ(render_chat(ChatFormat::nano3, parsed_messages(row), tools_of(row), c.opt), c.rendered) << c.name;
  }
}

TEST(ChatTemplate, nano3_chunks_match_nemotron_data_prep) {
  for (const Case& c : cases()) {
    if (c.sequences.empty()) continue;
    const OrderedJson row = OrderedJson::parse(c.row);
    const auto seqs = chat_training_chunks(ChatFormat::nano3, parsed_messages(row), tools_of(row));
    ASSERT_EQ(seqs.size(), c.sequences.size()) << c.name;
    for (size_t s = 0; s < seqs.size(); ++s) {
      ASSERT_EQ(seqs[s].size(), c.sequences[s].size()) << c.name << " sequence " << s;
      for (size_t k = 0; k < seqs[s].size(); ++k) {
        EXPECT_EQ(seqs[s][k].role, c.sequences[s][k].first) << c.name << " sequence " << s << " chunk " << k;
        EXPECT_EQ(seqs[s][k].text, c.sequences[s][k].second) << c.name << " sequence " << s << " chunk " << k;
      }
    }
  }
}

TEST(ChatTemplate, mask_covers_exactly_the_assistant_chunks) {
  const Tokenizer& tok = byte_tokenizer();
  for (const Case& c : cases()) {
    if (c.sequences.empty()) continue;
    const OrderedJson row = OrderedJson::parse(c.row);
    const SftRowResult r = process_sft_row(row, tok, SftRowOptions{});
    ASSERT_FALSE(r.dropped) << c.name << ": " << r.detail;
    ASSERT_EQ(r.sequences.size(), c.sequences.size()) << c.name;
    for (size_t s = 0; s < c.sequences.size(); ++s) {
      std::string text;
      std::vector<std::string> trained;
      for (const auto& [role, chunk] : c.sequences[s]) {
        text += chunk;
        if (role == "assistant") trained.push_back(chunk);
      }
      EXPECT_EQ(tok.decode(r.sequences[s].input_ids), text) << c.name;
      EXPECT_EQ(r.sequences[s].loss_mask.size(), r.sequences[s].input_ids.size());
      // Adjacent assistant chunks (none in these cases) would form one run.
      EXPECT_EQ(trained_runs(tok, r.sequences[s]), trained) << c.name << " sequence " << s;
    }
  }
}

TEST(ChatTemplate, mask_of_a_plain_conversation_pinned_token_by_token) {
  const Tokenizer& tok = byte_tokenizer();
  const OrderedJson row = OrderedJson::parse(R"({"messages": [{"role": "user", "content": "Hi"},
                                                 {"role": "assistant", "content": "Yo"}]})");
  const SftRowResult r = process_sft_row(row, tok, SftRowOptions{});
  ASSERT_FALSE(r.dropped);
  ASSERT_EQ(r.sequences.size(), 1u);
  // <|im_start|>system\n<|im_end|>\n <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think></think> | Yo<|im_end|>\n
  const size_t context = 1 + 7 + 1 + 1 + (1 + 5 + 2 + 1 + 1) + (1 + 10 + 15);
  std::vector<uint8_t> expected(context + 4, 1);  // the last 4: "Y" "o" <|im_end|> "\n"
  std::fill_n(expected.begin(), context, uint8_t{0});
  EXPECT_EQ(r.sequences[0].loss_mask, expected);
  EXPECT_EQ(r.sequences[0].input_ids[context + 2], 257);  // <|im_end|> is trained
}

TEST(ChatTemplate, generation_prompts) {
  EXPECT_EQ(chat_generation_prompt(ChatFormat::nano3, true), "<|im_start|>assistant\n<think>\n");
  EXPECT_EQ(chat_generation_prompt(ChatFormat::nano3, false), "<|im_start|>assistant\n<think></think>");
  EXPECT_EQ(chat_generation_prompt(ChatFormat::nano_v2), "<SPECIAL_11>Assistant\n");
  EXPECT_EQ(chat_generation_prompt(ChatFormat::nemotron_h), "");
  const OrderedJson msgs = OrderedJson::parse(R"([{"role": "user", "content": "Q"}])");
  ChatRenderOptions opt;
  opt.add_generation_prompt = true;
  EXPECT_EQ(render_chat(ChatFormat::nano3, msgs, nullptr, opt),
            "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n");
}

TEST(ChatTemplate, names) {
  EXPECT_EQ(chat_format_from_name("nano3"), ChatFormat::nano3);
  EXPECT_EQ(chat_format_from_name("nemotron-h"), ChatFormat::nemotron_h);
  EXPECT_EQ(chat_format_from_name("nemotron-h-aligned"), ChatFormat::nemotron_h);
  EXPECT_EQ(chat_format_from_name("nano-v2"), ChatFormat::nano_v2);
  EXPECT_EQ(chat_format_from_name("chatml"), std::nullopt);
}

// Megatron's sft_tokenizer.py templates (nemotron-h-aligned, nemotron-nano-v2), rendered with jinja2.
TEST(ChatTemplate, special_formats_render_like_megatron) {
  const OrderedJson msgs = OrderedJson::parse(R"([{"role": "system", "content": " Be brief. /think"},
      {"role": "user", "content": "What is 2 + 3? /no_think "}, {"role": "assistant", "content": " 5 "}])");
  EXPECT_EQ(render_chat(ChatFormat::nemotron_h, msgs, nullptr),
            "<SPECIAL_10>System\nBe brief. /think\n<SPECIAL_11>User\nWhat is 2 + 3? /no_think\n<SPECIAL_11>Assistant\n5\n");
  EXPECT_EQ(render_chat(ChatFormat::nano_v2, msgs, nullptr),
            "<SPECIAL_10>System\nBe brief.\n<SPECIAL_11>User\nWhat is 2 + 3?\n<SPECIAL_11>Assistant\n5\n<SPECIAL_12>\n");
  const auto v2 = chat_training_chunks(ChatFormat::nano_v2, msgs, nullptr);
  ASSERT_EQ(v2.size(), 1u);
  ASSERT_EQ(v2[0].size(), 4u);
  EXPECT_EQ(v2[0][2].text, "<SPECIAL_11>Assistant\n");
  EXPECT_FALSE(v2[0][2].trained());
  EXPECT_EQ(v2[0][3].text, "5\n<SPECIAL_12>\n");
  EXPECT_TRUE(v2[0][3].trained());
  const auto h = chat_training_chunks(ChatFormat::nemotron_h, msgs, nullptr);
  ASSERT_EQ(h[0].size(), 3u);
  EXPECT_EQ(h[0][1].text, "<SPECIAL_11>User\nWhat is 2 + 3? /no_think\n<SPECIAL_11>Assistant\n");
  EXPECT_EQ(h[0][2].text, "5\n");
  EXPECT_TRUE(h[0][2].trained());
  const OrderedJson tool_row = OrderedJson::parse(R"([{"role": "user", "content": "Q"}, {"role": "tool", "content": "1"}])");
  EXPECT_THROW(render_chat(ChatFormat::nano_v2, tool_row, nullptr), ChatTemplateError);
}

SftRowResult run(const char* row, SftRowOptions opt = {}) {
  return process_sft_row(OrderedJson::parse(row), byte_tokenizer(), opt);
}

TEST(SftRow, used_in_filter_keeps_tagged_rows_only) {
  SftRowOptions opt;
  opt.used_in_filter = "nano_v3";
  const char* msgs = R"("messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}])";
  EXPECT_FALSE(run(fmt::format(R"({{{}, "used_in": "nano_v3"}})", msgs).c_str(), opt).dropped);
  EXPECT_FALSE(run(fmt::format(R"({{{}, "used_in": "nano_v2, nano_v3"}})", msgs).c_str(), opt).dropped);
  EXPECT_FALSE(run(fmt::format(R"({{{}, "used_in": ["x", "nano_v3"]}})", msgs).c_str(), opt).dropped);
  EXPECT_EQ(run(fmt::format(R"({{{}, "used_in": "nano_v3x"}})", msgs).c_str(), opt).dropped, DropReason::used_in_filter);
  EXPECT_EQ(run(fmt::format(R"({{{}}})", msgs).c_str(), opt).dropped, DropReason::used_in_filter);
  opt.used_in_filter.clear();
  EXPECT_FALSE(run(fmt::format(R"({{{}}})", msgs).c_str(), opt).dropped);
}

TEST(SftRow, malformed_rows_are_dropped_with_their_reason) {
  EXPECT_EQ(run(R"({"text": "no messages"})").dropped, DropReason::no_messages);
  EXPECT_EQ(run(R"({"messages": []})").dropped, DropReason::no_messages);
  EXPECT_EQ(run(R"({"messages": "hello"})").dropped, DropReason::bad_message);
  EXPECT_EQ(run(R"({"messages": [{"content": "no role"}]})").dropped, DropReason::bad_message);
  EXPECT_EQ(run(R"({"messages": [{"role": "robot", "content": "beep"}]})").dropped, DropReason::unknown_role);
  // Content is a string or null (the server refuses the same: data/chat_messages.h).
  EXPECT_EQ(run(R"({"messages": [{"role": "user", "content": 5}, {"role": "assistant", "content": "A"}]})").dropped,
            DropReason::bad_message);
  EXPECT_EQ(run(R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<tool_call>x</tool_call>"}]})").dropped,
            DropReason::tool_call_without_tools);
  EXPECT_EQ(run(R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "",
                  "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"x\": "}}]}]})").dropped,
            DropReason::bad_tool_call);
  EXPECT_EQ(run(R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "tool_calls": [{"name": "f"}]}]})").dropped,
            DropReason::bad_tool_call);
  // Arguments that parse but are not an object cannot be rendered.
  EXPECT_EQ(run(R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "",
                  "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]}]})").dropped,
            DropReason::template_error);
  // A system message without text.
  EXPECT_EQ(run(R"({"messages": [{"role": "system", "content": null}, {"role": "user", "content": "Q"}]})").dropped,
            DropReason::template_error);
  // Reasoning in a conversation that ends on the user: the sub-sequence ending there is skipped
  // (Nemotron 91958ce), the one before it kept.
  const SftRowResult ends_on_user = run(R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A",
                  "reasoning_content": "R"}, {"role": "user", "content": "Q2"}]})");
  EXPECT_FALSE(ends_on_user.dropped);
  EXPECT_EQ(ends_on_user.sequences.size(), 1u);
  // Content that already has think tags does not match the incremental render: Python drops it too.
  EXPECT_EQ(run(R"({"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>r</think>A"}]})").dropped,
            DropReason::template_error);
}

TEST(SftRow, max_doc_tokens_truncates_and_counts) {
  SftRowOptions opt;
  opt.max_doc_tokens = 20;
  const SftRowResult r = run(R"({"messages": [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}]})", opt);
  ASSERT_EQ(r.sequences.size(), 1u);
  EXPECT_EQ(r.sequences[0].input_ids.size(), 20u);
  EXPECT_EQ(r.sequences[0].loss_mask.size(), 20u);
  EXPECT_EQ(r.truncated, 1);
}

}  // namespace
}  // namespace nemotron::data
