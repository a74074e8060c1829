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

// What follows the rendered conversation so the model answers as the assistant:
// nano3 "<|im_start|>assistant\n<think>\n" (thinking) or "<|im_start|>assistant\n<think></think>";
// nano-v2 "<SPECIAL_11>Assistant\n"; nemotron-h "" (its user turn already ends with the prefix).
std::string chat_generation_prompt(ChatFormat f, bool enable_thinking = true);

}  // namespace nemotron::data
