// Turns a parsed request into engine jobs, one per choice: prompts tokenized (completions: as the
// tokenizer's template adds special tokens; chat: rendered with the recipe's chat template, no
// special tokens added, as HF apply_chat_template(tokenize=True)), the model name and the
// context length checked (404 for another model, 400 when prompt + max_tokens exceeds it), the
// sampling settings mapped onto the engine's. Without a seed each request draws a fresh one.
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
};

// 404 model_not_found unless `requested` is "" or the served model's name.
void check_model(const ServedModel& m, const std::string& requested);

PreparedRequest prepare_completion(const ServedModel& m, const CompletionRequest& r);
PreparedRequest prepare_chat(const ServedModel& m, const ChatRequest& r);

}  // namespace nemotron::serve
