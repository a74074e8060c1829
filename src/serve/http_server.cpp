#include "serve/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>

#include <sys/socket.h>

#include "core/error.h"
#include "serve/job_builder.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/sse_stream.h"
#include "serve/tool_calls.h"

namespace nemotron::serve {

namespace {

using Clock = std::chrono::steady_clock;

// The access log's per-request figures. httplib runs a request's routing, handler, streaming
// and logger on one thread, so a thread_local carries them from the first to the last.
struct RequestLog {
  Clock::time_point start;
  int64_t tokens = 0;
};
thread_local RequestLog t_log;
std::mutex g_stdout;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_body(e)); }

std::string request_id(const char* prefix) {
  static std::atomic<uint64_t> next{0};
  return fmt::format("{}-{:x}{:08x}", prefix,
                     std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                         .count(),
                     next++);
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

using Generations = std::vector<std::shared_ptr<Generation>>;  // a request's, one per choice

Generations submit_all(EngineWorker& worker, const PreparedRequest& p) {
  std::vector<GenerationJob> jobs;
  for (const PreparedChoice& c : p.choices) jobs.push_back(c.job);
  return worker.submit(std::move(jobs));  // together: a prompt's choices on one data rank
}

// The client's X-Request-Id when it is a sensible one (printable ASCII, no spaces, <= 128 bytes,
// so it can go into logs and headers unchanged), else a fresh one.
std::string client_request_id(const httplib::Request& req) {
  const std::string given = req.get_header_value("X-Request-Id");
  const bool ok = !given.empty() && given.size() <= 128 &&
                  std::all_of(given.begin(), given.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  return ok ? given : request_id("req");
}

GenerationState wait_finished(Generation& g) {
  GenerationState all;
  while (true) {
    GenerationState st = g.wait(all.tokens.size());
    if (all.tokens.empty()) all.prompt_logprobs = std::move(st.prompt_logprobs);
    all.tokens.insert(all.tokens.end(), st.tokens.begin(), st.tokens.end());
    all.logprobs.insert(all.logprobs.end(), st.logprobs.begin(), st.logprobs.end());
    all.text = std::move(st.text);
    all.finished = st.finished;
    all.finish = st.finish;
    all.error = std::move(st.error);
    all.error_status = st.error_status;
    if (all.finished) return all;
  }
}

ApiError engine_error(const std::string& message, int status = 500) { return ApiError(status, message, "server_error"); }

// The error a finished generation carries, if any: 503 while shutting down, else 500.
void throw_if_failed(const GenerationState& st) {
  if (!st.error.empty()) throw engine_error(st.error, st.error_status);
}

ApiError too_large(int64_t limit, std::optional<uint64_t> bytes = std::nullopt) {
  return ApiError(413,
                  fmt::format("the request body is {}more than this server's limit of {} bytes (--max-request-bytes)",
                              bytes ? fmt::format("{} bytes, ", *bytes) : "", limit),
                  "invalid_request_error", "", "request_too_large");
}

bool is_health(const std::string& path) { return path == "/health" || path == "/v1/health"; }

// Compares in time independent of where the strings differ (the key is a secret).
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// A request whose body will not be read (refused first): the connection must close after the
// answer, since the unread body would be taken for the next request.
// A streamed request's response (stream = true): its choices' events as they come; a client that
// leaves cancels the request's generations (a no-op for the finished ones). `model` outlives the
// stream (the server's own).
void stream_response(httplib::Response& res, StreamKind kind, const ServedModel& model, const ResponseHead& head,
                     std::shared_ptr<const PreparedRequest> prepared, std::shared_ptr<Generations> gens, bool logprobs,
                     bool usage) {
  res.set_chunked_content_provider(
      "text/event-stream",
      [kind, &model, head, prepared, gens, logprobs, usage](size_t, httplib::DataSink& sink) {
        StreamOutcome o = stream_choices(kind, model, head, *prepared, *gens, logprobs, usage,
                                         [&](const std::string& e) { return sink.write(e.data(), e.size()); });
        t_log.tokens = o.completion_tokens;
        if (o.client_gone) return false;
        sink.done();
        return true;
      },
      [gens](bool) {
        for (const auto& g : *gens) g->cancel();
      });
}

bool has_body(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") || req.get_header_value<uint64_t>("Content-Length") > 0;
}

}  // namespace

OpenAiServer::OpenAiServer(EngineWorker& worker, ServedModel model, ServerOptions options, ServerMetrics& metrics)
    : worker_(worker), metrics_(metrics), model_(std::move(model)), options_(std::move(options)), created_(unix_now()),
      http_(std::make_unique<BoundedHttpServer>(options_.transport)) {
  // httplib's default sets SO_REUSEPORT, with which a second server binds a port already served
  // and the two split its connections: SO_REUSEADDR alone (a restart is not refused for the
  // closed connections' TIME_WAIT) makes a port in use an error.
  http_->set_socket_options([](socket_t sock) {  // httplib.h: int on POSIX
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  add_routes();
}

OpenAiServer::~OpenAiServer() = default;

int OpenAiServer::bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) throw InputError(fmt::format("--host {}: cannot bind a port there", options_.host));
  } else if (!http_->bind_to_port(options_.host, port)) {
    throw InputError(fmt::format("--host {} --port {}: cannot bind (address in use, or not an address of this machine)",
                                 options_.host, port));
  }
  http_->widen_listen_queue();
  return port;
}

void OpenAiServer::listen() { http_->listen_after_bind(); }

void OpenAiServer::stop() { http_->stop(); }

void OpenAiServer::check_body_size(size_t bytes) const {
  if (static_cast<int64_t>(bytes) > options_.transport.max_request_bytes)  // a chunked body
    throw too_large(options_.transport.max_request_bytes, bytes);
}

void OpenAiServer::add_routes() {
  httplib::Server& s = *http_;
  // A client that asks before sending a body (curl does past 1 MB) is told 413 instead of
  // "100 Continue" when the body is over the limit: it never sends it.
  s.set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    const uint64_t declared = req.get_header_value<uint64_t>("Content-Length");
    if (declared <= static_cast<uint64_t>(options_.transport.max_request_bytes)) return 100;
    t_log = RequestLog{Clock::now(), 0};
    close_connection_after_response();
    send_error(res, too_large(options_.transport.max_request_bytes, declared));
    return 413;
  });
  // Before the body is read: CORS, then the API key, then the body's declared size.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_log = RequestLog{Clock::now(), 0};
    res.set_header("X-Request-Id", client_request_id(req));
    using R = httplib::Server::HandlerResponse;
    const std::string origin = req.get_header_value("Origin");
    if (!origin.empty() && !options_.allowed_origins.empty() &&
        std::any_of(options_.allowed_origins.begin(), options_.allowed_origins.end(),
                    [&](const std::string& o) { return o == "*" || o == origin; })) {
      res.set_header("Access-Control-Allow-Origin", origin);
      res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {  // a preflight: no key is sent with it
        res.status = 204;
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", req.has_header("Access-Control-Request-Headers")
                                                           ? req.get_header_value("Access-Control-Request-Headers")
                                                           : std::string("Authorization, Content-Type"));
        res.set_header("Access-Control-Max-Age", "600");
        return R::Handled;
      }
    }
    if (!options_.api_key.empty() && !is_health(req.path)) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string bearer = "Bearer ";
      if (auth.compare(0, bearer.size(), bearer) != 0 || !same_secret(auth.substr(bearer.size()), options_.api_key)) {
        if (has_body(req)) close_connection_after_response();
        res.set_header("WWW-Authenticate", "Bearer");
        send_error(res, ApiError(401,
                                 auth.empty() ? "no API key: send it as the header `Authorization: Bearer <key>`"
                                              : "incorrect API key in the Authorization header",
                                 "invalid_request_error", "", "invalid_api_key"));
        return R::Handled;
      }
    }
    const uint64_t declared = req.get_header_value<uint64_t>("Content-Length");
    if (declared > static_cast<uint64_t>(options_.transport.max_request_bytes)) {
      close_connection_after_response();
      send_error(res, too_large(options_.transport.max_request_bytes, declared));
      return R::Handled;
    }
    return R::Unhandled;
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.count_request(res.status);
    const double secs = std::chrono::duration<double>(Clock::now() - t_log.start).count();
    std::lock_guard lock(g_stdout);
    std::printf("%s %s %d %lld tokens %.3f s\n", req.method.c_str(), req.path.c_str(), res.status,
                static_cast<long long>(t_log.tokens), secs);
    std::fflush(stdout);
  });
  // Anything that reached no route, or that httplib refused itself (a malformed request line),
  // gets the JSON error body too.
  s.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (request_over_size_limit()) res.status = 413;  // a chunked body past the limit (httplib says 400)
    if (res.status == 413) close_connection_after_response();  // the body was not read to its end
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404)
      send_error(res, ApiError(404, fmt::format("no route {} {}", req.method, req.path), "invalid_request_error", "",
                               "not_found"));
    else if (res.status == 413)
      send_error(res, too_large(options_.transport.max_request_bytes));
    else
      send_error(res, ApiError(res.status, fmt::format("{} {}: the request was refused (HTTP {})", req.method, req.path,
                                                       res.status),
                               "invalid_request_error"));
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, engine_error(what));
  });

  auto health = [](const httplib::Request&, httplib::Response& res) { send_json(res, 200, {{"status", "ok"}}); };
  s.Get("/v1/health", health);
  s.Get("/health", health);
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, models_body(model_.name, created_, model_.max_model_len));
  });
  s.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      check_model(model_, req.matches[1].str());
      send_json(res, 200, models_body(model_.name, created_, model_.max_model_len)["data"][0]);
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });

  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  // vLLM's tokenizer endpoints (at the root, as vLLM has them, and under /v1).
  auto tokenize_route = [this](const httplib::Request& req, httplib::Response& res) {
    try {
      check_body_size(req.body.size());
      const TokenizeRequest r = parse_tokenize_request(req.body);
      const std::vector<int32_t> ids = tokenize(model_, r);
      json body = {
          {"count", ids.size()}, {"max_model_len", model_.max_model_len}, {"tokens", ids}, {"token_strs", nullptr}};
      if (r.return_token_strs) {
        body["token_strs"] = json::array();
        for (int32_t id : ids) body["token_strs"].push_back(token_text(*model_.tok, id));
      }
      send_json(res, 200, body);
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  };
  auto detokenize_route = [this](const httplib::Request& req, httplib::Response& res) {
    try {
      check_body_size(req.body.size());
      const DetokenizeRequest r = parse_detokenize_request(req.body);
      check_model(model_, r.model);
      for (int32_t t : r.tokens)
        if (t >= model_.vocab_size)
          throw bad_request(fmt::format("'tokens': token id {} is outside the vocabulary [0, {})", t, model_.vocab_size),
                            "tokens");
      send_json(res, 200, {{"prompt", model_.tok->decode(r.tokens, /*skip_special_tokens=*/false)}});
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  };
  s.Post("/tokenize", tokenize_route);
  s.Post("/v1/tokenize", tokenize_route);
  s.Post("/detokenize", detokenize_route);
  s.Post("/v1/detokenize", detokenize_route);

  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      check_body_size(req.body.size());
      const CompletionRequest r = parse_completion_request(req.body);
      auto prepared = std::make_shared<PreparedRequest>(prepare_completion(model_, r));
      auto gens = std::make_shared<Generations>(submit_all(worker_, *prepared));
      const ResponseHead head{request_id("cmpl"), model_.name, unix_now()};
      if (r.stream) return stream_response(res, StreamKind::completion, model_, head, prepared, gens,
                                           r.logprobs.has_value(), r.include_usage);
      json choices = json::array();
      int64_t completion_tokens = 0;
      for (size_t i = 0; i < gens->size(); ++i) {
        const PreparedChoice& c = prepared->choices[i];
        const GenerationState st = wait_finished(*(*gens)[i]);
        throw_if_failed(st);
        completion_tokens += static_cast<int64_t>(st.tokens.size());
        json lp = nullptr;
        if (r.logprobs) {
          lp = completion_logprobs(r.echo ? st.prompt_logprobs : std::vector<TokenLogprob>{}, *model_.tok,
                                   r.echo ? 0 : static_cast<int64_t>(c.prompt_text.size()));
          append_completion_logprobs(lp, st.logprobs, *model_.tok);
        }
        choices.push_back(completion_choice(c.index, (r.echo ? c.prompt_text : "") + st.text, lp,
                                            openai_finish_reason(st.finish)));
      }
      t_log.tokens = completion_tokens;
      send_json(res, 200, completion_body(head, std::move(choices), usage_json(prepared->prompt_tokens, completion_tokens)));
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });

  s.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      check_body_size(req.body.size());
      const ChatRequest r = parse_chat_request(req.body);
      auto prepared = std::make_shared<PreparedRequest>(prepare_chat(model_, r));
      force_likeliest_tool(worker_, model_, *prepared);
      auto gens = std::make_shared<Generations>(submit_all(worker_, *prepared));
      const ResponseHead head{request_id("chatcmpl"), model_.name, unix_now()};
      if (r.stream) return stream_response(res, StreamKind::chat, model_, head, prepared, gens, r.logprobs, r.include_usage);
      json choices = json::array();
      int64_t completion_tokens = 0;
      for (size_t i = 0; i < gens->size(); ++i) {
        const GenerationState st = wait_finished(*(*gens)[i]);
        throw_if_failed(st);
        completion_tokens += static_cast<int64_t>(st.tokens.size());
        const json lp = r.logprobs ? chat_logprobs(st.logprobs, *model_.tok) : json(nullptr);
        if (!prepared->parse_tool_calls) {
          choices.push_back(chat_choice(prepared->choices[i].index, st.text, lp, openai_finish_reason(st.finish)));
          continue;
        }
        const ParsedToolOutput out = parse_tool_calls(prepared->forced_prefix + st.text, prepared->tools, /*final=*/true,
                                                     prepared->max_tool_calls);
        json calls = json::array();
        for (const ToolCall& c : out.calls) calls.push_back(tool_call_json(c));
        choices.push_back(chat_choice(prepared->choices[i].index, out.content, lp,
                                      chat_finish_reason(st.finish, !calls.empty(), prepared->named_tool), calls));
      }
      t_log.tokens = completion_tokens;
      send_json(res, 200, chat_body(head, std::move(choices), usage_json(prepared->prompt_tokens, completion_tokens)));
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
}

}  // namespace nemotron::serve
