#include "serve/step_report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace nemotron::serve {

using nlohmann::json;

void set_text_change(RequestEvent& e, const std::string& sent, const std::string& now) {
  const size_t n = std::min(sent.size(), now.size());
  size_t same = 0;
  while (same < n && sent[same] == now[same]) ++same;
  e.text_at = same;
  e.text = now.substr(same);
}

void apply_text_change(std::string& text, const RequestEvent& e) {
  NM_CHECK(e.text_at <= text.size(), "a text change at byte {} of a text of {}", e.text_at, text.size());
  text.resize(e.text_at);
  text += e.text;
}

namespace {

// Bytes as numbers: a detokenized text need not end on a UTF-8 boundary (request_codec's rule).
json bytes_of(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }
std::string text_of(const json& j) {
  const auto b = j.get<std::vector<uint8_t>>();
  return std::string(b.begin(), b.end());
}
// JSON has no number for NaN or an infinite log-prob (a token of probability 0): those go as text.
json number_of(double x) { return std::isfinite(x) ? json(x) : json(std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"); }
double double_of(const json& j) { return j.is_string() ? std::stod(j.get<std::string>()) : j.get<double>(); }

}  // namespace

std::string encode(const StepReport& r) {
  json events = json::array();
  for (const RequestEvent& e : r.events) {
    json j{{"tag", e.tag}, {"text_at", e.text_at}, {"text", bytes_of(e.text)}, {"finished", e.finished},
           {"finish", static_cast<int>(e.finish)}, {"error", bytes_of(e.error)}};
    if (e.token) j["token"] = *e.token;
    if (e.logprob) {
      json top = json::array();
      for (const auto& [id, lp] : e.logprob->top) top.push_back({id, number_of(lp)});
      j["logprob"] = {{"token", e.logprob->token}, {"logprob", number_of(e.logprob->logprob)}, {"top", top}};
    }
    events.push_back(std::move(j));
  }
  return json{{"queued", r.queued}, {"events", events}}.dump();
}

StepReport decode_step_report(const std::string& text) {
  const json j = json::parse(text);
  StepReport r;
  r.queued = j.at("queued").get<int64_t>();
  for (const json& x : j.at("events")) {
    RequestEvent e;
    e.tag = x.at("tag").get<uint64_t>();
    e.text_at = x.at("text_at").get<size_t>();
    e.text = text_of(x.at("text"));
    e.finished = x.at("finished").get<bool>();
    e.finish = static_cast<engine::FinishReason>(x.at("finish").get<int>());
    e.error = text_of(x.at("error"));
    if (x.contains("token")) e.token = x.at("token").get<int32_t>();
    if (x.contains("logprob")) {
      const json& l = x.at("logprob");
      TokenLogprob lp;
      lp.token = l.at("token").get<int32_t>();
      lp.logprob = double_of(l.at("logprob"));
      for (const json& t : l.at("top")) lp.top.emplace_back(t.at(0).get<int32_t>(), double_of(t.at(1)));
      e.logprob = std::move(lp);
    }
    r.events.push_back(std::move(e));
  }
  return r;
}

}  // namespace nemotron::serve
