// Built-in chat templates, selected by name, rendered byte for byte as the Python stack renders
// them (reference/data-formats.md §6.2):
//   nano3       Nemotron 3 Nano/Super: ChatML + <think>, tools and tool calls in XML-like tags
//               (NVIDIA-NeMo/Nemotron's templates/nano3.jinja through HF apply_chat_template with
//               trim_blocks/lstrip_blocks), enable_thinking / truncate_history_thinking /
//               reasoning_budget as in its chat_template_kwargs.
//   nemotron-h  Megatron's `nemotron-h-aligned` prompt format (<SPECIAL_10>/<SPECIAL_11>).
//   nano-v2     Megatron's `nemotron-nano-v2` prompt format (<SPECIAL_10..12>).
// Messages are OpenAI-style JSON objects (role, content, reasoning_content, tool_calls with
// `arguments` already parsed into objects). What a template cannot render (a missing system text,
// arguments that are not an object, a role the format lacks) throws ChatTemplateError; data prep
// drops and counts such rows. The generation prompt is what `generate --chat` and a server append.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "data/python_format.h"

namespace nemotron::data {

enum class ChatFormat { nano3, nemotron_h, nano_v2 };

// "nano3", "nemotron-h" (or "nemotron-h-aligned"), "nano-v2" (or "nemotron-nano-v2").
std::optional<ChatFormat> chat_format_from_name(std::string_view name);
const char* chat_format_name(ChatFormat f);
inline constexpr std::string_view kChatFormatNames = "nano3, nemotron-h, nano-v2";

struct ChatTemplateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ChatRenderOptions {
  bool add_generation_prompt = false;
  bool enable_thinking = true;            // nano3: "<think>\n" vs "<think></think>" generation prompt
  bool truncate_history_thinking = true;  // nano3: drop reasoning of turns before the last user turn
  std::optional<int64_t> reasoning_budget;  // nano3: "{thinking token budget: N}" after the last user turn
};

// The whole conversation as text. `tools` is a JSON array of function schemas or null.
std::string render_chat(ChatFormat f, const OrderedJson& messages, const OrderedJson& tools,
                        const ChatRenderOptions& opt = {});

namespace jinja {
class Template;
}

// A chat template: a built-in renderer, or a Jinja template (a .jinja file, a tokenizer_config.json's
// `chat_template`, or a checkpoint's own) rendered as transformers' apply_chat_template renders it:
// variables messages, tools (None when absent), documents (None), add_generation_prompt, the
// tokenizer's special tokens (bos_token, eos_token, ...) and, as Nemotron's data prep and vLLM pass
// them, both `chat_template_kwargs` ({enable_thinking, plus truncate_history_thinking when off and
// reasoning_budget when set}) and `enable_thinking`. Cheap to copy (the parsed template is shared).
class ChatTemplate {
 public:
  ChatTemplate(ChatFormat f = ChatFormat::nano3) : builtin_(f), name_(chat_format_name(f)) {}
  // Jinja source; `origin` names it in errors (a path); `special_tokens` a JSON object of strings.
  // Throws ChatTemplateError "origin:line: what" on a syntax error.
  static ChatTemplate from_jinja(std::string_view source, std::string origin, const OrderedJson& special_tokens);
  // `spec`: a built-in name (kChatFormatNames); a .jinja file (special tokens from a
  // tokenizer_config.json beside it, else beside `tokenizer_file` when given); a tokenizer_config.json;
  // a directory holding chat_template.jinja or a tokenizer_config.json with a chat_template (a
  // checkpoint). Throws InputError naming the spec and what is missing.
  static ChatTemplate load(const std::string& spec, const std::string& tokenizer_file = "");
  // As load, where `spec` "checkpoint" means the model's own template (load of `checkpoint_dir`)
  // and "auto" the model's own when it has one (chat_template.jinja, or a tokenizer_config.json
  // with a chat_template), else the built-in nano3: what serve, generate and eval accept.
  static ChatTemplate for_model(const std::string& spec, const std::string& checkpoint_dir);

  std::optional<ChatFormat> builtin() const { return jinja_ ? std::nullopt : std::optional<ChatFormat>(builtin_); }
  const std::string& name() const { return name_; }  // the built-in's name or the template's path
  // Throws ChatTemplateError ("origin:line: what" for a Jinja template).
  std::string render(const OrderedJson& messages, const OrderedJson& tools, const ChatRenderOptions& opt = {}) const;

 private:
  ChatFormat builtin_ = ChatFormat::nano3;
  std::string name_;
  std::shared_ptr<const jinja::Template> jinja_;
  std::shared_ptr<const OrderedJson> special_tokens_;
};

inline std::string render_chat(const ChatTemplate& t, const OrderedJson& messages, const OrderedJson& tools,
                               const ChatRenderOptions& opt = {}) {
  return t.render(messages, tools, opt);
}

// What a model is asked to continue: the conversation and the generation prompt, thinking off (RL
// rollouts, held-out answers). A built-in: render_chat + chat_generation_prompt(f, false); a Jinja
// template: rendered with add_generation_prompt and enable_thinking false. Throws ChatTemplateError.
std::string render_prompt(const ChatTemplate& t, const OrderedJson& messages, const OrderedJson& tools);

// What follows the rendered conversation so the model answers as the assistant:
// nano3 "<|im_start|>assistant\n<think>\n" (thinking) or "<|im_start|>assistant\n<think></think>";
// nano-v2 "<SPECIAL_11>Assistant\n"; nemotron-h "" (its user turn already ends with the prefix).
std::string chat_generation_prompt(ChatFormat f, bool enable_thinking = true);

}  // namespace nemotron::data
