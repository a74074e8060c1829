// The server's connections, under our rules rather than cpp-httplib's defaults: TCP_NODELAY on
// every accepted socket (without it each response on a kept-alive connection waited ~40 ms for
// Nagle and delayed ACK), keep-alive without a small request cap, one thread per connection up to
// a cap (more get an immediate 503, so a crowd of slow clients cannot queue /health behind them),
// a deadline for a request's headers and body to arrive (a client trickling one byte a second is
// cut off), and an idle timeout between requests. httplib parses and routes the requests.
#pragma once
#include <httplib.h>

#include <atomic>
#include <cstdint>

namespace nemotron::serve {

struct TransportOptions {
  int max_connections = 256;        // connections served at once, each on its own thread
  double read_timeout_s = 30;       // a request's headers and body must arrive within this
  double idle_timeout_s = 5;        // a kept-alive connection waits this long for its next request
  double write_timeout_s = 30;      // a response write waits this long for the client to take data
  int64_t max_keep_alive_requests = 100000;  // requests on one connection before it is closed
  // A request body larger than this is refused: by its Content-Length before it is read (the
  // routes' check), and for a chunked body by the stream, which stops reading a request at this
  // many bytes plus kHeaderBytes.
  int64_t max_request_bytes = 8 << 20;
};

// What a request may spend on its request line, headers and chunk framing on top of its body.
inline constexpr int64_t kHeaderBytes = 1 << 20;

class BoundedHttpServer : public httplib::Server {
 public:
  explicit BoundedHttpServer(TransportOptions options);
  // Connections open now (served or being refused).
  int open_connections() const { return open_.load(); }
  // After bind: the listen queue httplib made (5 connections) widened to the system's limit. A
  // burst of clients connecting at once overflowed it, and each connection past it waited for
  // the client's SYN retry (1 s, then 3 s).
  void widen_listen_queue();

 private:
  // httplib calls this on a pool thread for each accepted socket (a private virtual of
  // httplib::Server: overriding it is how SSLServer supplies its own stream too).
  bool process_and_close_socket(socket_t sock) override;
  TransportOptions options_;
  std::atomic<int> open_{0};
};

// Called by a handler on the connection's thread: close the connection after this response (the
// request's body was refused unread, so what follows on the socket is not a request).
void close_connection_after_response();
// True while answering a request whose stream stopped at the size limit (httplib then reports a
// read failure as 400; the route's error handler answers 413).
bool request_over_size_limit();

}  // namespace nemotron::serve
