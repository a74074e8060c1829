// One RL data row, as it comes in, to the NeMo Gym row `data prep rl` writes (reference/
// data-formats.md §7): {"responses_create_params": {"input": [{"role", "content"}, ...], ...},
// "question", "expected_answer", "agent_ref"?, "task_name", ...every other field kept}.
// Accepted inputs:
//  * NeMo Gym rows (`responses_create_params`): checked (input items, roles, Gym's accepted keys)
//    and kept as they are;
//  * Nemotron placeholder rows (`_hf_placeholder: {row, question_template}`, §7.2) that carry their
//    question (`question`, or `problem`) and answer: the template is applied ("{question}" replaced,
//    else the question appended), `_hf_placeholder` removed, a JSON-string answer decoded;
//    placeholder rows without their data need the external dataset and are dropped, counted;
//  * plain NeMo RL rows (§7.3): `input`/`output` (keys configurable) or `messages` (the turns up
//    to the first assistant turn are the prompt, its content the expected answer).
// A row that fits none of them is dropped with a reason, never an exception.
#pragma once
#include <optional>
#include <string>

#include "data/python_format.h"

namespace nemotron::data {

struct RlRowOptions {
  std::string input_key = "input", output_key = "output";  // plain NeMo RL rows
  std::string prompt_template;  // plain rows: "{}" replaced by the problem (NeMo RL's prompt_file); empty = as is
  std::string system_prompt;    // plain rows: a system turn first; empty = none
  std::string agent_name;       // `agent_ref` added to rows without one; empty = none
  std::string task_name;        // `task_name` added to rows without one (the source's name)
};

struct RlRowResult {
  std::optional<OrderedJson> row;  // the Gym row; nullopt when dropped
  std::string kind;                // "gym", "placeholder", "plain", "messages"
  std::string drop_reason;         // short, counted ("no prompt", "bad responses_create_params", ...)
  std::string detail;              // what exactly, for the first dropped row of each reason
};

RlRowResult convert_rl_row(OrderedJson row, const RlRowOptions& opts);

}  // namespace nemotron::data
