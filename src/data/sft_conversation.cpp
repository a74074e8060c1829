#include "data/sft_conversation.h"

#include <algorithm>

#include <fmt/format.h>

#include "data/chat_messages.h"
#include "data/tokenizer.h"

namespace nemotron::data {

namespace {

constexpr std::string_view kImEnd = "<|im_end|>\n";
constexpr std::string_view kEmptyThinkPrompt = "<|im_start|>assistant\n<think></think>";

const std::string& role(const OrderedJson& m) { return m.at("role").get_ref<const std::string&>(); }

// reasoning_renders_empty of Nemotron's data prep: the template keeps reasoning only when it is a
// string that is non-empty after trimming, so a missing key, null, "" and "\n\n" all render as
// "<think></think>", and thinking-mode data prep then appends that text by hand.
bool reasoning_renders_empty(const OrderedJson& m) {
  auto it = m.find("reasoning_content");
  return it == m.end() || !it->is_string() || python_strip(it->get_ref<const std::string&>()).empty();
}

OrderedJson prefix(const OrderedJson& messages, size_t n) {
  OrderedJson out = OrderedJson::array();
  for (size_t i = 0; i < n; ++i) out.push_back(messages[i]);
  return out;
}

// Python's s[a:b] for non-negative a, b (clamped).
std::string slice(const std::string& s, size_t a, size_t b) {
  a = std::min(a, s.size()), b = std::min(b, s.size());
  return a < b ? s.substr(a, b - a) : std::string();
}

std::string render(const ChatTemplate& t, const OrderedJson& messages, size_t n, const OrderedJson& tools, bool thinking,
                   bool gen) {
  ChatRenderOptions opt;
  opt.enable_thinking = thinking;
  opt.add_generation_prompt = gen;
  return t.render(prefix(messages, n), tools, opt);
}

// The end of the rendering of messages[0, i] in the whole conversation's text `full`, as
// split_template_into_messages cuts it: a user or tool turn followed by an assistant turn carries
// the generation prompt (or, in thinking mode before a turn whose reasoning renders empty,
// "<|im_start|>assistant\n<think></think>"); a turn followed by anything else carries nothing,
// since the whole render has no prompt there. When the incremental render is not a prefix of
// `full`, its right-stripped text is tried (NVIDIA-NeMo/Nemotron issue #184: templates whose
// generation prompt ends in whitespace the next turn does not start with).
size_t chunk_end(const ChatTemplate& t, const OrderedJson& messages, size_t i, const OrderedJson& tools, bool thinking, const std::string& full) {
  const size_t n = messages.size();
  const bool next_is_assistant = i + 1 < n && role(messages[i + 1]) == "assistant";
  std::string upto;
  if (thinking && role(messages[i]) != "assistant" && next_is_assistant && reasoning_renders_empty(messages[i + 1])) {
    upto = render(t, messages, i + 1, tools, thinking, false) + std::string(kEmptyThinkPrompt);
  } else {
    const bool gen = (role(messages[i]) == "tool" || role(messages[i]) == "user") && next_is_assistant;
    upto = render(t, messages, i + 1, tools, thinking, gen);
  }
  if (upto.size() <= full.size() && full.compare(0, upto.size(), upto) == 0) return upto.size();
  const std::string stripped = python_rstrip(upto);
  if (!stripped.empty() && stripped.size() <= full.size() && full.compare(0, stripped.size(), stripped) == 0)
    return stripped.size();
  throw ChatTemplateError(fmt::format("rendering up to message {} is not a prefix of the whole conversation", i));
}

// split_template_into_messages of Nemotron's data prep (core/chat_template.py).
std::vector<ChatChunk> split_nano3(const ChatTemplate& t, const OrderedJson& messages, const OrderedJson& tools, bool from_last_user,
                                   bool thinking) {
  const size_t n = messages.size();
  const std::string full = render(t, messages, n, tools, thinking, false);
  std::vector<ChatChunk> out;
  size_t previous = 0, begin = 0;
  if (from_last_user) {
    // find_last_user_message_end: the context chunk ends after the last user turn and the
    // generation prompt (or the empty-reasoning text), with no prefix check.
    // Python's full.find(...) + len(...): -1 + 11 when a template has no "<|im_end|>\n".
    const size_t found = full.find(kImEnd);
    const size_t system_end = found == std::string::npos ? kImEnd.size() - 1 : found + kImEnd.size();
    int64_t last_user = -1;
    for (size_t i = 0; i < n; ++i)
      if (role(messages[i]) == "user") last_user = static_cast<int64_t>(i);
    if (last_user < 0) throw ChatTemplateError("no user turn");
    const size_t lu = static_cast<size_t>(last_user);
    std::string upto;
    if (thinking && lu + 1 < n && role(messages[lu + 1]) == "assistant" && reasoning_renders_empty(messages[lu + 1]))
      upto = render(t, messages, lu + 1, tools, thinking, false) + std::string(kEmptyThinkPrompt);
    else
      upto = render(t, messages, lu + 1, tools, thinking, true);
    out.push_back({"system", slice(full, 0, system_end)});
    out.push_back({"user", slice(full, system_end, upto.size())});
    previous = upto.size();
    begin = lu + 1;
  }
  for (size_t i = begin; i < n; ++i) {
    if (i + 1 < n && role(messages[i]) == "tool" && role(messages[i + 1]) == "tool") continue;  // parallel results
    const size_t end = chunk_end(t, messages, i, tools, thinking, full);
    out.push_back({role(messages[i]), slice(full, previous, end)});
    previous = end;
  }
  // split_system_user_chunks: a first user chunk holding the system block is cut in two.
  if (!out.empty() && out[0].role == "user" && out[0].text.find("<|im_start|>system") != std::string::npos) {
    const size_t user_start = out[0].text.find("<|im_start|>user");
    if (user_start != std::string::npos) {
      const std::string text = out[0].text;
      const size_t system_end = text.find(kImEnd) + kImEnd.size();
      out[0] = {"system", slice(text, 0, system_end)};
      out.insert(out.begin() + 1, ChatChunk{"user", text.substr(user_start)});
    }
  }
  return out;
}

// Megatron's SFTTokenizer masks: a chunk per turn, nano-v2's assistant prefix masked.
std::vector<ChatChunk> split_special(ChatFormat f, const OrderedJson& messages) {
  std::vector<ChatChunk> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = role(messages[i]);
    std::string text = render_chat(f, prefix(messages, i + 1), nullptr).substr(i == 0 ? 0 : render_chat(f, prefix(messages, i), nullptr).size());
    if (r == "assistant") {
      const OrderedJson& c = messages[i].at("content");
      if (!c.is_string() || c.get_ref<const std::string&>().empty()) throw ChatTemplateError("empty assistant turn");
      if (i == 0 || (role(messages[i - 1]) != "user" && role(messages[i - 1]) != "tool"))
        throw ChatTemplateError("an assistant turn must follow a user turn");
      const std::string head = chat_generation_prompt(f);
      if (!head.empty()) {
        out.push_back({"assistant_prefix", head});
        text = text.substr(head.size());
      }
    }
    out.push_back({r, text});
  }
  return out;
}

}  // namespace

std::vector<std::vector<ChatChunk>> chat_training_chunks(const ChatTemplate& t, const OrderedJson& messages,
                                                         const OrderedJson& tools) {
  if (!messages.is_array() || messages.empty()) throw ChatTemplateError("no messages");
  for (const OrderedJson& m : messages)
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw ChatTemplateError("a message is not an object with a string role");
  if (t.builtin() && *t.builtin() != ChatFormat::nano3) {
    const ChatFormat f = *t.builtin();
    if (tools.is_array() && !tools.empty())
      throw ChatTemplateError(fmt::format("the {} format has no tools", chat_format_name(f)));
    return {split_special(f, messages)};
  }
  bool thinking = false;
  for (const OrderedJson& m : messages) {
    auto it = m.find("reasoning_content");
    thinking = thinking || (it != m.end() && python_truthy(*it));
  }
  if (!thinking) return {split_nano3(t, messages, tools, false, false)};
  std::vector<size_t> users;
  for (size_t i = 0; i < messages.size(); ++i)
    if (role(messages[i]) == "user") users.push_back(i);
  std::vector<std::vector<ChatChunk>> out;
  for (size_t k = 0; k < users.size(); ++k) {
    const size_t end = k + 1 == users.size() ? messages.size() : users[k + 1];
    if (users[k] + 1 == end) continue;  // ends on this user turn (consecutive users): nothing to train
    out.push_back(split_nano3(t, prefix(messages, end), tools, true, true));
  }
  return out;
}

MaskedSequence tokenize_chunks(const Tokenizer& tok, const std::vector<ChatChunk>& chunks) {
  MaskedSequence s;
  for (const ChatChunk& c : chunks) {
    std::vector<int32_t> ids = tok.encode(c.text, false);
    s.input_ids.insert(s.input_ids.end(), ids.begin(), ids.end());
    s.loss_mask.insert(s.loss_mask.end(), ids.size(), c.trained() ? 1 : 0);
  }
  return s;
}

const char* drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::used_in_filter: return "used_in_filter";
    case DropReason::no_messages: return "no_messages";
    case DropReason::bad_message: return "bad_message";
    case DropReason::unknown_role: return "unknown_role";
    case DropReason::tool_call_without_tools: return "tool_call_without_tools";
    case DropReason::bad_tool_call: return "bad_tool_call";
    case DropReason::template_error: return "template_error";
  }
  return "?";
}

bool used_in_matches(const OrderedJson* used_in, const std::string& tag) {
  if (!used_in) return false;
  if (used_in->is_array()) {
    for (const OrderedJson& v : *used_in)
      if (v.is_string() && v.get_ref<const std::string&>() == tag) return true;
    return false;
  }
  if (!used_in->is_string()) return false;
  const std::string& s = used_in->get_ref<const std::string&>();
  if (s == tag) return true;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (python_strip(std::string_view(s).substr(start, comma - start)) == tag) return true;
    start = comma + 1;
  }
  return false;
}

namespace {

bool text_field_contains(const OrderedJson& m, const char* key, std::string_view what) {
  auto it = m.find(key);
  return it != m.end() && it->is_string() && it->get_ref<const std::string&>().find(what) != std::string::npos;
}

SftRowResult drop(DropReason r, std::string detail) {
  SftRowResult res;
  res.dropped = r;
  res.detail = std::move(detail);
  return res;
}

}  // namespace

SftRowResult process_sft_row(const OrderedJson& row, const Tokenizer& tok, const SftRowOptions& opt) {
  if (!opt.used_in_filter.empty()) {
    auto it = row.find(opt.used_in_field);
    if (!used_in_matches(it == row.end() ? nullptr : &*it, opt.used_in_filter))
      return drop(DropReason::used_in_filter, fmt::format("{} does not contain \"{}\"", opt.used_in_field, opt.used_in_filter));
  }
  auto mit = row.find(opt.messages_field);
  if (mit == row.end() || !python_truthy(*mit))
    return drop(DropReason::no_messages, fmt::format("no \"{}\"", opt.messages_field));
  if (!mit->is_array()) return drop(DropReason::bad_message, fmt::format("\"{}\" is not a list", opt.messages_field));
  OrderedJson messages = *mit;
  std::optional<MessageProblem> bad = normalize_chat_messages(messages);
  if (bad && bad->reason != DropReason::bad_tool_call) return drop(bad->reason, bad->detail);
  bool any_call = false, any_header = false;
  for (const OrderedJson& m : messages) {
    any_call = any_call || text_field_contains(m, "content", "<tool_call>") || text_field_contains(m, "reasoning_content", "<tool_call>");
    any_header = any_header || text_field_contains(m, "content", "# Tools") || text_field_contains(m, "reasoning_content", "# Tools");
  }
  if (any_call && !any_header) return drop(DropReason::tool_call_without_tools, "<tool_call> present but # Tools missing");
  if (bad) return drop(bad->reason, bad->detail);  // tool calls are checked after the # Tools filter, as in Python
  auto tit = row.find(opt.tools_field);
  const OrderedJson tools = tit == row.end() ? OrderedJson(nullptr) : *tit;
  std::vector<std::vector<ChatChunk>> seqs;
  try {
    seqs = chat_training_chunks(opt.chat_template, messages, tools);
  } catch (const ChatTemplateError& e) {
    return drop(DropReason::template_error, e.what());
  }
  SftRowResult res;
  for (const std::vector<ChatChunk>& chunks : seqs) {
    MaskedSequence s;
    try {
      s = tokenize_chunks(tok, chunks);
    } catch (const std::exception& e) {  // text the tokenizer refuses (invalid UTF-8)
      return drop(DropReason::template_error, e.what());
    }
    if (s.input_ids.empty()) continue;
    if (opt.max_doc_tokens > 0 && static_cast<int64_t>(s.input_ids.size()) > opt.max_doc_tokens) {
      s.input_ids.resize(static_cast<size_t>(opt.max_doc_tokens));
      s.loss_mask.resize(static_cast<size_t>(opt.max_doc_tokens));
      ++res.truncated;
    }
    res.sequences.push_back(std::move(s));
  }
  return res;
}

}  // namespace nemotron::data
