#include "serve/step_message.h"

#include <nlohmann/json.hpp>

#include "engine/request_codec.h"

namespace nemotron::serve {

using nlohmann::json;

std::string encode(const StepMessage& m) {
  json admitted = json::array();
  for (const AdmittedJob& a : m.admitted)
    admitted.push_back({{"request", engine::request_to_json(a.request)},
                        {"score_prompt", a.score_prompt},
                        {"top_logprobs", a.top_logprobs},
                        {"generates", a.generates},
                        {"data_rank", a.data_rank}});
  return json{{"stop", m.stop}, {"admitted", admitted}, {"cancelled", m.cancelled}}.dump();
}

StepMessage decode_step_message(const std::string& text) {
  const json j = json::parse(text);
  StepMessage m;
  m.stop = j.at("stop").get<bool>();
  for (const json& a : j.at("admitted"))
    m.admitted.push_back({engine::request_from_json(a.at("request")), a.at("score_prompt").get<bool>(),
                          a.at("top_logprobs").get<int64_t>(), a.at("generates").get<bool>(),
                          a.at("data_rank").get<int>()});
  m.cancelled = j.at("cancelled").get<std::vector<uint64_t>>();
  return m;
}

}  // namespace nemotron::serve
