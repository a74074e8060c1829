// The tiny recipe's tasks, generated from the bundled corpus's skill (data/corpus_skills.h) on
// problems no training stage saw (give a first_problem past the stages' ranges), so a laptop
// evaluates without a download. A task config's `generator:` mapping picks one:
//   kind: arithmetic_facts  multiple_choice: "17 + 25 =" -> " 42." among near misses (the answer
//                           +-1, +-10), the pretraining corpus's fact form
//   kind: arithmetic_chat   generate: the question as a user turn, answered when the completion's
//                           last "The answer is N." has N right (the form SFT teaches)
//   kind: arithmetic_text   perplexity: held-out documents of the pretraining corpus
// and the corpus keys (seed, first_problem, min_digits, max_digits, max_steps, skills) plus
// `count` (items).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/eval_task.h"

namespace nemotron::eval {

// `where` is the dotted key of the generator ("evaluation.tasks[0].generator"); errors name it.
std::vector<EvalItem> generate_task_items(TaskType type, const nlohmann::json& generator, const std::string& source,
                                          const std::string& where);

}  // namespace nemotron::eval
