// Generation and answer checking for eval's generate tasks: completions from the generation
// engine (engine/) on the model being evaluated, with the task's sampling settings, and the
// verifiers by name: final_answer (the tiny recipe's "The answer is N."), math (the RL stage's
// math verifier: \boxed{}, "#### N", numeric and fraction equivalence).
#pragma once
#include <cstdint>
#include <string>

#include "data/tokenizer.h"
#include "eval/eval_config.h"
#include "eval/task_scoring.h"
#include "model/hybrid_model.h"

namespace nemotron::cli {

eval::GenerateFn make_generate_fn(model::HybridModel& net, const data::Tokenizer& tok, const eval::TaskSpec& task,
                                  int64_t max_seq_len);
eval::VerifyFn answer_verifier(const std::string& name);

}  // namespace nemotron::cli
