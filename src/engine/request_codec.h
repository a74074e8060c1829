// Requests as JSON, so that one rank can hand another the exact requests it queued: under tensor
// parallelism every rank of the group runs the same engine in lockstep (same requests, same ids,
// same sampling parameters), and only rank 0 reads prompts or HTTP. Every field round-trips
// exactly (doubles with their shortest exact text, seeds as unsigned integers). Results likewise,
// for the way back: under expert parallelism each data rank runs its own requests and rank 0
// writes them all.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace nemotron::engine {

nlohmann::json request_to_json(const Request& r);
// The inverse of request_to_json (an internal message: a malformed one is a bug, not bad input).
Request request_from_json(const nlohmann::json& j);
nlohmann::json result_to_json(const Result& r);
Result result_from_json(const nlohmann::json& j);

}  // namespace nemotron::engine
