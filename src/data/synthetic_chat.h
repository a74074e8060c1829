// The bundled SFT data: chat rows on the skill of the bundled pretraining corpus (corpus_skills.h),
// generated deterministically from (seed, row), so SFT teaches the chat format on answers the
// base model already half knows. Every path of the chat templates occurs: a plain question, a
// system prompt, two turns, reasoning_content (the worked steps as reasoning, the answer as
// content), a calculator tool call with its result, and two parallel calls. Row i uses problems
// first_problem + 2i and + 2i + 1; held-out prompts use the problems after the last row's, so they
// are disjoint from the training rows. A few rows carry only a `used_in` tag other than nano_v3 so
// the used_in filter has something to drop.
#pragma once
#include <cstdint>
#include <vector>

#include "data/python_format.h"
#include "data/synthetic_corpus.h"

namespace nemotron::data {

inline constexpr const char* kChatUsedIn = "nano_v3,super_v3";

// `cfg.num_examples` rows {"messages": [...], "tools": [...]?, "used_in": "..."}.
std::vector<OrderedJson> generate_chat_rows(const CorpusConfig& cfg);
// `count` held-out prompts {"messages": [{"role": "user", ...}], "answer": "N", "reference": solution}.
std::vector<OrderedJson> generate_chat_heldout(const CorpusConfig& cfg, int64_t count);

}  // namespace nemotron::data
