// What the server's engine does before a step, as rank 0 decides it and every other rank of a
// tensor-parallel group replays it (cli/inference_ranks.h): the jobs admitted (the engine request
// with its tag, the data rank whose engine runs it, and whether the prompt is scored first), the
// running requests that end at this step's token (their client left, or the server stops), and
// whether the server stops. Rank 0 broadcasts one before every step and one each time it wakes
// from idle, so the engines of all ranks hold the same requests and meet in the same collectives.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace nemotron::serve {

struct AdmittedJob {
  engine::Request request;    // its tag is the worker's key of the job
  bool score_prompt = false;  // the prompt's log-probs first (a forward of its own)
  int64_t top_logprobs = 0;   // with score_prompt: the alternatives asked for
  bool generates = true;      // false: score the prompt only (max_new_tokens 0: nothing enters the engine)
  // Under expert parallelism the data rank whose engine generates it (the prompt is scored by all:
  // the scoring forward is collective over the expert group). 0 otherwise.
  int data_rank = 0;
};

struct StepMessage {
  bool stop = false;
  std::vector<AdmittedJob> admitted;
  std::vector<uint64_t> cancelled;  // request tags whose next token ends them (FinishReason::cancelled)
};

std::string encode(const StepMessage& m);
StepMessage decode_step_message(const std::string& text);

}  // namespace nemotron::serve
