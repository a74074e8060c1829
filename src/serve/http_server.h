// The OpenAI-compatible HTTP server: routes /v1/completions, /v1/chat/completions, /v1/models,
// /v1/health (and /health) onto the engine worker. Every error is OpenAI's JSON error body with
// its status (400 bad request, 404 unknown model or route, 500 engine failure); the server keeps
// serving. One access-log line per request on stdout: method, path, status, generated tokens,
// seconds.
#pragma once
#include <memory>
#include <string>

#include "serve/engine_worker.h"
#include "serve/served_model.h"

namespace httplib {
class Server;
}

namespace nemotron::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (bind() says which)
  int threads = 64; // HTTP worker threads: concurrent connections served at once
};

class OpenAiServer {
 public:
  OpenAiServer(EngineWorker& worker, ServedModel model, ServerOptions options);
  ~OpenAiServer();
  // Binds the socket (InputError when the address is taken or invalid); returns the port.
  int bind();
  // Serves until stop() (from another thread).
  void listen();
  void stop();

 private:
  void add_routes();
  EngineWorker& worker_;
  ServedModel model_;
  ServerOptions options_;
  int64_t created_;
  std::unique_ptr<httplib::Server> http_;
};

}  // namespace nemotron::serve
