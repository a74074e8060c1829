// One chat row -> training sequences with the assistant-only loss mask, as Nemotron's SFT data
// prep builds them (reference/data-formats.md §6.1, §6.3):
//  * the row is filtered (used_in), checked (messages, roles, <tool_call> without "# Tools"),
//    its tool-call arguments parsed from JSON strings; a failing row is dropped with a reason;
//  * the conversation is cut into role-labelled chunks by rendering it message by message
//    (each render must be a prefix of the full render, or be one once its trailing whitespace is
//    stripped, else the row is dropped); a user or tool turn carries the generation prompt only
//    when an assistant turn follows it;
//  * with reasoning anywhere: thinking on, one sequence per user turn (one that would end on a
//    user turn is skipped), only the turns after that sequence's last user turn trained; without:
//    thinking off, one sequence, all assistant turns trained;
// This holds for nano3 and for any Jinja template (Nemotron's data prep runs the same code on
// whatever template the tokenizer carries).
//  * each chunk is tokenized on its own (no special tokens added), mask 1 on assistant chunks;
//  * max_doc_tokens truncates a sequence.
// Megatron's <SPECIAL_n> formats are cut per message instead (their masks: everything of an
// assistant turn but the nano-v2 "<SPECIAL_11>Assistant\n" prefix).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/chat_template.h"

namespace nemotron::data {

class Tokenizer;

struct ChatChunk {
  std::string role;  // the message role the text came from ("system" for the rendered system block)
  std::string text;
  bool trained() const { return role == "assistant"; }
};

// §6.3: the chunks of each training sequence of `messages` (tool-call arguments already objects).
// Throws ChatTemplateError when the conversation cannot be cut (prefix mismatch, no user turn
// where one is needed, a message the template cannot render).
std::vector<std::vector<ChatChunk>> chat_training_chunks(const ChatTemplate& t, const OrderedJson& messages,
                                                         const OrderedJson& tools);

struct MaskedSequence {
  std::vector<int32_t> input_ids;
  std::vector<uint8_t> loss_mask;  // 1 = the token is trained (unshifted: marks the token itself)
};
MaskedSequence tokenize_chunks(const Tokenizer& tok, const std::vector<ChatChunk>& chunks);

// Why a row was dropped. Counted per reason in metadata.json.
enum class DropReason {
  used_in_filter,           // used_in does not carry the filter tag
  no_messages,              // messages missing, null or empty
  bad_message,              // messages not a list of objects with a string role
  unknown_role,             // a role other than system, user, assistant, tool
  tool_call_without_tools,  // "<tool_call>" in a message but "# Tools" in none
  bad_tool_call,            // a tool call without function/arguments, or arguments that are not JSON
  template_error,           // the template could not render or cut the conversation
};
inline constexpr int kNumDropReasons = 7;
const char* drop_reason_name(DropReason r);

struct SftRowOptions {
  std::string messages_field = "messages", tools_field = "tools";
  std::string used_in_field = "used_in", used_in_filter;  // empty filter = keep every row
  ChatTemplate chat_template;  // nano3 unless given
  int64_t max_doc_tokens = 0;  // 0 = no truncation
};

struct SftRowResult {
  std::optional<DropReason> dropped;
  std::string detail;  // why, for the log
  std::vector<MaskedSequence> sequences;
  int64_t truncated = 0;  // sequences cut by max_doc_tokens
};

// Never throws on bad row content: every problem becomes a DropReason.
SftRowResult process_sft_row(const OrderedJson& row, const Tokenizer& tok, const SftRowOptions& opt);

// used_in matching: a string equal to the tag, a comma-separated string, or a list holding it.
bool used_in_matches(const OrderedJson* used_in, const std::string& tag);

}  // namespace nemotron::data
