#include "serve/sse_stream.h"

#include <algorithm>
#include <optional>

#include "serve/tool_calls.h"

namespace nemotron::serve {

StreamOutcome stream_choices(StreamKind kind, const ServedModel& m, const ResponseHead& head, const PreparedRequest& req,
                             const std::vector<std::shared_ptr<Generation>>& gens, bool logprobs, bool include_usage,
                             const SseWrite& write) {
  StreamOutcome out;
  auto send = [&](const json& chunk) {
    if (out.client_gone) return false;
    if (!write(sse_event(chunk))) {
      out.client_gone = true;
      for (const auto& g : gens) g->cancel();
    }
    return !out.client_gone;
  };
  const bool chat = kind == StreamKind::chat;
  for (size_t i = 0; i < gens.size(); ++i) {
    const int64_t index = req.choices[i].index;
    if (chat && !send(chat_chunk(head, index, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr))) return out;
    size_t seen = 0, sent = 0;
    // Chat with tools: content up to a call, then each call whole as it closes (serve/tool_calls.h).
    std::optional<ToolCallStream> tools;
    if (chat && req.parse_tool_calls) tools.emplace(req.tools, req.forced_prefix, req.max_tool_calls);
    int64_t offset = static_cast<int64_t>(req.choices[i].prompt_text.size());  // completions' text_offset
    while (true) {
      GenerationState st = gens[i]->wait(seen);
      if (!st.error.empty()) {
        // As vLLM streams an error: the HTTP status as its code.
        send({{"error",
               {{"message", st.error}, {"type", "server_error"}, {"param", nullptr}, {"code", st.error_status}}}});
        return out;
      }
      seen += st.tokens.size();
      out.completion_tokens += static_cast<int64_t>(st.tokens.size());
      const size_t ready = st.finished ? st.text.size() : (st.text.size() > req.stop_holdback ? st.text.size() - req.stop_holdback : 0);
      std::string delta;
      json tool_calls = json::array();
      if (tools) {
        ToolCallStream::Delta d = tools->update(st.text, ready, st.finished);
        delta = std::move(d.content);
        tool_calls = std::move(d.tool_calls);
      } else {
        delta = ready > sent ? st.text.substr(sent, ready - sent) : std::string();
        sent = std::max(sent, ready);
      }
      const bool with_lp = logprobs && !st.logprobs.empty();
      if (!delta.empty() || with_lp) {
        json lp = nullptr;
        if (with_lp && chat) {
          lp = chat_logprobs(st.logprobs, *m.tok);
        } else if (with_lp) {
          lp = completion_logprobs(st.logprobs, *m.tok, offset);
          offset = lp["next_offset"].get<int64_t>();
        }
        const json chunk = chat ? chat_chunk(head, index, {{"content", delta}}, lp, nullptr)
                                : completion_chunk(head, index, delta, lp, nullptr);
        if (!send(chunk)) return out;
      }
      for (const json& call : tool_calls)
        if (!send(chat_chunk(head, index, {{"tool_calls", json::array({call})}}, nullptr, nullptr))) return out;
      if (st.finished) {
        const char* why = chat ? chat_finish_reason(st.finish, tools && tools->called(), req.named_tool)
                               : openai_finish_reason(st.finish);
        const json last = chat ? chat_chunk(head, index, json::object(), nullptr, why)
                               : completion_chunk(head, index, "", nullptr, why);
        if (!send(last)) return out;
        break;
      }
    }
  }
  if (include_usage &&
      !send(usage_chunk(head, chat ? "chat.completion.chunk" : "text_completion", usage_json(req.prompt_tokens, out.completion_tokens))))
    return out;
  if (!write(kSseDone)) out.client_gone = true;
  return out;
}

}  // namespace nemotron::serve
