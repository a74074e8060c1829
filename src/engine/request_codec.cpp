#include "engine/request_codec.h"

namespace nemotron::engine {

using nlohmann::json;

json request_to_json(const Request& r) {
  const SamplingParams& p = r.params;
  // Stop strings as their bytes: a --stop argument need not be UTF-8, which JSON text must be.
  json stop = json::array();
  for (const std::string& s : p.stop) stop.push_back(std::vector<uint8_t>(s.begin(), s.end()));
  json bias = json::array();
  for (const auto& [id, b] : p.logit_bias) bias.push_back({id, b});
  json j = {{"prompt", r.prompt},
            {"tag", r.tag},
            {"wants_logits", r.wants_logits},
            {"temperature", p.temperature},
            {"top_p", p.top_p},
            {"top_k", p.top_k},
            {"max_new_tokens", p.max_new_tokens},
            {"stop_token_ids", p.stop_token_ids},
            {"stop", stop},
            {"seed", p.seed},
            {"logit_bias", bias},
            {"presence_penalty", p.presence_penalty},
            {"frequency_penalty", p.frequency_penalty}};
  if (r.id) j["id"] = *r.id;
  return j;
}

Request request_from_json(const json& j) {
  Request r;
  r.prompt = j.at("prompt").get<std::vector<int32_t>>();
  r.tag = j.at("tag").get<uint64_t>();
  r.wants_logits = j.at("wants_logits").get<bool>();
  if (j.contains("id")) r.id = j.at("id").get<uint64_t>();
  SamplingParams& p = r.params;
  p.temperature = j.at("temperature").get<double>();
  p.top_p = j.at("top_p").get<double>();
  p.top_k = j.at("top_k").get<int64_t>();
  p.max_new_tokens = j.at("max_new_tokens").get<int64_t>();
  p.stop_token_ids = j.at("stop_token_ids").get<std::vector<int32_t>>();
  for (const json& s : j.at("stop")) {
    const auto bytes = s.get<std::vector<uint8_t>>();
    p.stop.emplace_back(bytes.begin(), bytes.end());
  }
  p.seed = j.at("seed").get<uint64_t>();
  for (const json& b : j.at("logit_bias")) p.logit_bias.emplace_back(b.at(0).get<int32_t>(), b.at(1).get<float>());
  p.presence_penalty = j.at("presence_penalty").get<double>();
  p.frequency_penalty = j.at("frequency_penalty").get<double>();
  return r;
}

json result_to_json(const Result& r) {
  // The text as its bytes: a detokenized cut need not end on a UTF-8 boundary.
  return {{"id", r.id},
          {"tag", r.tag},
          {"prompt", r.prompt},
          {"tokens", r.tokens},
          {"logprobs", r.logprobs},
          {"raw_logprobs", r.raw_logprobs},
          {"finish", static_cast<int>(r.finish)},
          {"text", std::vector<uint8_t>(r.text.begin(), r.text.end())}};
}

Result result_from_json(const json& j) {
  Result r;
  r.id = j.at("id").get<uint64_t>();
  r.tag = j.at("tag").get<uint64_t>();
  r.prompt = j.at("prompt").get<std::vector<int32_t>>();
  r.tokens = j.at("tokens").get<std::vector<int32_t>>();
  r.logprobs = j.at("logprobs").get<std::vector<float>>();
  r.raw_logprobs = j.at("raw_logprobs").get<std::vector<float>>();
  r.finish = static_cast<FinishReason>(j.at("finish").get<int>());
  const auto bytes = j.at("text").get<std::vector<uint8_t>>();
  r.text.assign(bytes.begin(), bytes.end());
  return r;
}

}  // namespace nemotron::engine
