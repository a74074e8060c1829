#include "serve/openai_response.h"

#include <fmt/format.h>

#include <cmath>

#include "data/tokenizer_utf8.h"

namespace nemotron::serve {

namespace {

// The token's bytes (its decoded text for a tokenizer without a byte-level decoder).
std::string raw_token(const data::Tokenizer& tok, int32_t id) {
  if (std::optional<std::string> b = tok.token_bytes(id)) return *b;
  const int32_t one[1] = {id};
  return tok.decode(one, /*skip_special_tokens=*/false);
}

json nullable(const char* s) { return s ? json(s) : json(nullptr); }

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

}  // namespace

std::string token_text(const data::Tokenizer& tok, int32_t id) {
  const std::string bytes = raw_token(tok, id);
  if (data::utf8_invalid_at(bytes) == std::string::npos) return bytes;
  std::string out = "bytes:";
  for (unsigned char c : bytes) out += fmt::format("\\x{:02x}", c);
  return out;
}

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

const char* openai_finish_reason(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::stop_token:
    case engine::FinishReason::stop_string: return "stop";
    case engine::FinishReason::length:
    case engine::FinishReason::max_seq_len: return "length";
    case engine::FinishReason::cancelled: return "length";
  }
  return "stop";
}

const char* chat_finish_reason(engine::FinishReason r, bool tool_calls, bool named_tool) {
  const char* why = openai_finish_reason(r);
  return tool_calls && !named_tool && std::string_view(why) == "stop" ? "tool_calls" : why;
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

json models_body(const std::string& model, int64_t created, int64_t max_model_len) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model},
                                 {"object", "model"},
                                 {"created", created},
                                 {"owned_by", "nemotron"},
                                 {"root", model},
                                 {"max_model_len", max_model_len}}})}};
}

json completion_logprobs(const std::vector<TokenLogprob>& lp, const data::Tokenizer& tok, int64_t offset) {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  out["next_offset"] = offset;  // removed by the caller's last append
  append_completion_logprobs(out, lp, tok);
  return out;
}

void append_completion_logprobs(json& into, const std::vector<TokenLogprob>& more, const data::Tokenizer& tok) {
  int64_t offset = into.value("next_offset", int64_t{0});
  for (const TokenLogprob& t : more) {
    into["tokens"].push_back(token_text(tok, t.token));
    into["text_offset"].push_back(offset);
    offset += static_cast<int64_t>(raw_token(tok, t.token).size());  // bytes into the text
    if (std::isnan(t.logprob)) {
      into["token_logprobs"].push_back(nullptr);
      into["top_logprobs"].push_back(nullptr);
      continue;
    }
    into["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (const auto& [id, lp] : t.top) {
      const std::string k = token_text(tok, id);
      if (!top.contains(k)) top[k] = lp;  // two ids with one text: the likelier one, as OpenAI's dict
    }
    into["top_logprobs"].push_back(std::move(top));
  }
  into["next_offset"] = offset;
}

json chat_logprobs(const std::vector<TokenLogprob>& lp, const data::Tokenizer& tok) {
  json content = json::array();
  for (const TokenLogprob& t : lp) {
    json top = json::array();
    // Chat's token is text (a partial character as U+FFFD); its `bytes` join back to the text.
    for (const auto& [id, l] : t.top) {
      const std::string raw = raw_token(tok, id);
      top.push_back({{"token", data::utf8_lossy(raw)}, {"logprob", l}, {"bytes", bytes_of(raw)}});
    }
    const std::string raw = raw_token(tok, t.token);
    content.push_back({{"token", data::utf8_lossy(raw)},
                       {"logprob", t.logprob},
                       {"bytes", bytes_of(raw)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json completion_body(const ResponseHead& h, json choices, const json& usage) {
  return {{"id", h.id},           {"object", "text_completion"}, {"created", h.created},
          {"model", h.model},     {"choices", std::move(choices)}, {"usage", usage}};
}

json completion_choice(int64_t index, const std::string& text, const json& logprobs, const char* finish_reason) {
  json lp = logprobs;
  if (lp.is_object()) lp.erase("next_offset");
  return {{"index", index}, {"text", text}, {"logprobs", lp}, {"finish_reason", nullable(finish_reason)}};
}

json completion_chunk(const ResponseHead& h, int64_t index, const std::string& text, const json& logprobs,
                      const char* finish_reason) {
  return {{"id", h.id},
          {"object", "text_completion"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({completion_choice(index, text, logprobs, finish_reason)})}};
}

json chat_body(const ResponseHead& h, json choices, const json& usage) {
  return {{"id", h.id},       {"object", "chat.completion"},   {"created", h.created},
          {"model", h.model}, {"choices", std::move(choices)}, {"usage", usage}};
}

json chat_choice(int64_t index, const std::string& content, const json& logprobs, const char* finish_reason,
                 const json& tool_calls) {
  json message = {{"role", "assistant"}, {"content", content}};
  if (!tool_calls.empty()) {
    if (content.empty()) message["content"] = nullptr;
    message["tool_calls"] = tool_calls;
  }
  return {{"index", index},
          {"message", std::move(message)},
          {"logprobs", logprobs},
          {"finish_reason", nullable(finish_reason)}};
}

json chat_chunk(const ResponseHead& h, int64_t index, const json& delta, const json& logprobs, const char* finish_reason) {
  return {{"id", h.id},
          {"object", "chat.completion.chunk"},
          {"created", h.created},
          {"model", h.model},
          {"choices", json::array({{{"index", index},
                                    {"delta", delta},
                                    {"logprobs", logprobs},
                                    {"finish_reason", nullable(finish_reason)}}})}};
}

json usage_chunk(const ResponseHead& h, const char* object, const json& usage) {
  return {{"id", h.id},     {"object", object},           {"created", h.created},
          {"model", h.model}, {"choices", json::array()}, {"usage", usage}};
}

}  // namespace nemotron::serve
