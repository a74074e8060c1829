#include "serve/http_server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include <sys/socket.h>

#include "core/error.h"
#include "serve/job_builder.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/sse_stream.h"

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

std::vector<std::shared_ptr<Generation>> submit_all(EngineWorker& worker, const PreparedRequest& p) {
  std::vector<std::shared_ptr<Generation>> gens;
  for (const PreparedChoice& c : p.choices) gens.push_back(worker.submit(c.job));
  return gens;
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
    if (all.finished) return all;
  }
}

ApiError engine_error(const std::string& message) { return ApiError(500, message, "server_error"); }

}  // namespace

OpenAiServer::OpenAiServer(EngineWorker& worker, ServedModel model, ServerOptions options)
    : worker_(worker), model_(std::move(model)), options_(std::move(options)), created_(unix_now()),
      http_(std::make_unique<httplib::Server>()) {
  const int threads = options_.threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
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
  return port;
}

void OpenAiServer::listen() { http_->listen_after_bind(); }

void OpenAiServer::stop() { http_->stop(); }

void OpenAiServer::add_routes() {
  httplib::Server& s = *http_;
  s.set_pre_routing_handler([](const httplib::Request&, httplib::Response&) {
    t_log = RequestLog{Clock::now(), 0};
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    const double secs = std::chrono::duration<double>(Clock::now() - t_log.start).count();
    std::lock_guard lock(g_stdout);
    std::printf("%s %s %d %lld tokens %.3f s\n", req.method.c_str(), req.path.c_str(), res.status,
                static_cast<long long>(t_log.tokens), secs);
    std::fflush(stdout);
  });
  // Anything that reached no route, or that httplib refused itself (a malformed request line),
  // gets the JSON error body too.
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404)
      send_error(res, ApiError(404, fmt::format("no route {} {}", req.method, req.path), "invalid_request_error", "",
                               "not_found"));
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

  s.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      const CompletionRequest r = parse_completion_request(req.body);
      auto prepared = std::make_shared<PreparedRequest>(prepare_completion(model_, r));
      auto gens = std::make_shared<std::vector<std::shared_ptr<Generation>>>(submit_all(worker_, *prepared));
      const ResponseHead head{request_id("cmpl"), model_.name, unix_now()};
      if (r.stream) {
        const bool lp = r.logprobs.has_value(), usage = r.include_usage;
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, head, prepared, gens, lp, usage](size_t, httplib::DataSink& sink) {
              StreamOutcome o = stream_choices(StreamKind::completion, model_, head, *prepared, *gens, lp, usage,
                                               [&](const std::string& e) { return sink.write(e.data(), e.size()); });
              t_log.tokens = o.completion_tokens;
              if (o.client_gone) return false;
              sink.done();
              return true;
            },
            [gens](bool) {
              for (const auto& g : *gens) g->cancel();  // a no-op for the finished ones
            });
        return;
      }
      json choices = json::array();
      int64_t completion_tokens = 0;
      for (size_t i = 0; i < gens->size(); ++i) {
        const PreparedChoice& c = prepared->choices[i];
        const GenerationState st = wait_finished(*(*gens)[i]);
        if (!st.error.empty()) throw engine_error(st.error);
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
      const ChatRequest r = parse_chat_request(req.body);
      auto prepared = std::make_shared<PreparedRequest>(prepare_chat(model_, r));
      auto gens = std::make_shared<std::vector<std::shared_ptr<Generation>>>(submit_all(worker_, *prepared));
      const ResponseHead head{request_id("chatcmpl"), model_.name, unix_now()};
      if (r.stream) {
        const bool lp = r.logprobs, usage = r.include_usage;
        res.set_chunked_content_provider(
            "text/event-stream",
            [this, head, prepared, gens, lp, usage](size_t, httplib::DataSink& sink) {
              StreamOutcome o = stream_choices(StreamKind::chat, model_, head, *prepared, *gens, lp, usage,
                                               [&](const std::string& e) { return sink.write(e.data(), e.size()); });
              t_log.tokens = o.completion_tokens;
              if (o.client_gone) return false;
              sink.done();
              return true;
            },
            [gens](bool) {
              for (const auto& g : *gens) g->cancel();
            });
        return;
      }
      json choices = json::array();
      int64_t completion_tokens = 0;
      for (size_t i = 0; i < gens->size(); ++i) {
        const GenerationState st = wait_finished(*(*gens)[i]);
        if (!st.error.empty()) throw engine_error(st.error);
        completion_tokens += static_cast<int64_t>(st.tokens.size());
        const json lp = r.logprobs ? chat_logprobs(st.logprobs, *model_.tok) : json(nullptr);
        choices.push_back(chat_choice(prepared->choices[i].index, st.text, lp, openai_finish_reason(st.finish)));
      }
      t_log.tokens = completion_tokens;
      send_json(res, 200, chat_body(head, std::move(choices), usage_json(prepared->prompt_tokens, completion_tokens)));
    } catch (const ApiError& e) {
      send_error(res, e);
    }
  });
}

}  // namespace nemotron::serve
