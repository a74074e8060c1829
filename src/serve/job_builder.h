// Turns a parsed request into engine jobs, one per choice: prompts tokenized (completions: the
// one BOS rule of data/prompt_encoding.h, as eval and generate; chat: rendered with the recipe's chat template, no
// special tokens added, as HF apply_chat_template(tokenize=True)), the model name and the
// context length checked (404 for another model, 400 when prompt + max_tokens exceeds it), the
// sampling settings mapped onto the engine's (logit_bias ids checked against the vocabulary).
// Without a seed each request draws a fresh one. tool_choice "required" or a named function
// appends the opening of a call to the prompt (serve/tool_calls.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "serve/engine_worker.h"
#include "serve/openai_request.h"
#include "serve/served_model.h"

namespace nemotron::serve {

struct PreparedChoice {
  int64_t index = 0;         // the choice's index in the response
  int64_t prompt_index = 0;  // which prompt it continues
  std::string prompt_text;   // for echo
  GenerationJob job;
};

struct PreparedRequest {
  std::vector<PreparedChoice> choices;
  int64_t prompt_tokens = 0;  // usage: each prompt counted once, whatever n
  // The longest stop string less one byte: streamed text is held back this much until the end,
  // so that no part of a stop string is ever sent.
  size_t stop_holdback = 0;
  // Chat with tools: whether the output is read for tool calls (tool_choice other than "none"),
  // the text the prompt ends with to force a call (it starts what is parsed), and the tools.
  bool parse_tool_calls = false;
  bool named_tool = false;  // tool_choice named a function: finish_reason stays "stop" (as OpenAI)
  size_t max_tool_calls = 0;  // 0: all; 1 with parallel_tool_calls false
  std::string forced_prefix;
  data::OrderedJson tools;
  // tool_choice "required" with several tools: the names to choose from (force_likeliest_tool).
  std::vector<std::string> tool_names_to_choose;
};

// 404 model_not_found unless `requested` is "" or the served model's name.
void check_model(const ServedModel& m, const std::string& requested);

PreparedRequest prepare_completion(const ServedModel& m, const CompletionRequest& r);
PreparedRequest prepare_chat(const ServedModel& m, const ChatRequest& r);

// tool_choice "required" with several tools: scores each tool's name as the continuation of the
// forced "<tool_call>\n<function=" (one prompt-scoring job per name on the worker, as echo does),
// and ends every choice's prompt with the likeliest name, so that the call names a listed tool.
// ApiError 500/503 when the worker fails or is stopping.
void force_likeliest_tool(EngineWorker& worker, const ServedModel& m, PreparedRequest& p);

// /tokenize: the ids /v1/completions (prompt) or /v1/chat/completions (messages) would generate from.
std::vector<int32_t> tokenize(const ServedModel& m, const TokenizeRequest& r);

}  // namespace nemotron::serve
