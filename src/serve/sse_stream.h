// Streaming (stream: true): a request's choices as server-sent events, "data: {chunk}\n\n" each,
// then "data: [DONE]\n\n", as OpenAI streams them: text deltas as tokens are generated (held back
// by the longest stop string less one byte, so no part of a stop string is sent), the last chunk
// of a choice with its finish_reason, chat's first delta with the role, and with
// stream_options.include_usage a last chunk with the usage and no choices. Choices are sent one
// after the other (all run together in the engine). A write that fails (the client went away)
// cancels every choice of the request in the engine and ends the stream.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "serve/engine_worker.h"
#include "serve/job_builder.h"
#include "serve/openai_response.h"
#include "serve/served_model.h"

namespace nemotron::serve {

enum class StreamKind { completion, chat };

struct StreamOutcome {
  int64_t completion_tokens = 0;
  bool client_gone = false;
};

using SseWrite = std::function<bool(const std::string& event)>;

StreamOutcome stream_choices(StreamKind kind, const ServedModel& m, const ResponseHead& head, const PreparedRequest& req,
                             const std::vector<std::shared_ptr<Generation>>& gens, bool logprobs, bool include_usage,
                             const SseWrite& write);

}  // namespace nemotron::serve
