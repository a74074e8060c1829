// The OpenAI-compatible HTTP server: routes /v1/completions, /v1/chat/completions, /v1/models,
// /v1/health (and /health) onto the engine worker, plus vLLM's /tokenize and /detokenize (also
// under /v1) and Prometheus' /metrics. Every error is OpenAI's JSON error body with its status
// (400 bad request, 401 without the API key, 404 unknown model or route, 413 body over the limit,
// 500 engine failure, 503 over the connection cap or shutting down); the server keeps serving.
// Every response carries an X-Request-Id: the client's own (up to 128 printable characters), else
// a fresh one. One access-log line per request on stdout: method, path, status, generated tokens,
// seconds.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "serve/engine_worker.h"
#include "serve/http_transport.h"
#include "serve/metrics.h"
#include "serve/served_model.h"

namespace nemotron::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (bind() says which)
  TransportOptions transport;             // connection cap, timeouts, body limit (serve/http_transport.h)
  std::string api_key;                    // non-empty: routes other than /health need `Authorization: Bearer <key>`
  std::vector<std::string> allowed_origins;  // CORS: origins answered with Access-Control-* ("*": any); empty: none
};

class OpenAiServer {
 public:
  // `metrics` (shared with the worker) counts requests and is served at /metrics; must outlive the server.
  OpenAiServer(EngineWorker& worker, ServedModel model, ServerOptions options, ServerMetrics& metrics);
  ~OpenAiServer();
  // Binds the socket (InputError when the address is taken or invalid); returns the port.
  int bind();
  // Serves until stop() (from another thread).
  void listen();
  void stop();

 private:
  void add_routes();
  void check_body_size(size_t bytes) const;  // ApiError 413 past the limit
  EngineWorker& worker_;
  ServerMetrics& metrics_;
  ServedModel model_;
  ServerOptions options_;
  int64_t created_;
  std::unique_ptr<BoundedHttpServer> http_;
};

}  // namespace nemotron::serve
