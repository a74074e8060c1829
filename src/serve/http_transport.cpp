#include "serve/http_transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace nemotron::serve {

namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_close_after = false;
thread_local bool t_over_limit = false;

// Threads that refuse connections past the cap: refusing takes a write of a few hundred bytes,
// so these few are never all busy for long.
constexpr int kRefusalThreads = 8;

// One thread per connection, started when no thread is free and kept for the next connection;
// at most max_threads (the connection cap plus the refusal threads), the rest wait in order.
class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads) : max_threads_(max_threads) {}
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(fn));
    // Idle threads each take one waiting connection; past them, a new thread (a count of idle
    // threads alone would leave a burst of connections queued behind long-lived ones).
    if (jobs_.size() > idle_ && threads_.size() < max_threads_) threads_.emplace_back([this] { work(); });
    else cv_.notify_one();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();  // after the queued and running connections end
  }

 private:
  void work() {
    std::unique_lock lock(mu_);
    while (true) {
      ++idle_;
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, nothing left
      std::function<void()> fn = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

int ms_until(Clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

// poll() for `events` up to `ms` (-1: no limit), through EINTR. >0 ready, 0 timed out, <0 error.
int wait_for(int fd, short events, int ms) {
  pollfd p{fd, events, 0};
  while (true) {
    const int r = ::poll(&p, 1, ms);
    if (r >= 0 || errno != EINTR) return r;
  }
}

// A socket whose peer has not closed it: nothing to read, or data (not EOF) waiting.
bool socket_alive(int fd) {
  if (wait_for(fd, POLLIN, 0) == 0) return true;
  char c;
  return ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

std::string address_string(const sockaddr_storage& a, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &in->sin6_addr, buf, sizeof(buf));
    port = ntohs(in->sin6_port);
  }
  return buf;
}

// The connection's stream, kept across its requests (bytes a client pipelined past one request
// stay buffered for the next). Reads stop at the current request's deadline; writes wait at
// most the write timeout for the client to take data.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int fd, const TransportOptions& o) : fd_(fd), options_(o), buf_(16 * 1024) {}

  void start_request() {
    deadline_ = Clock::now() + seconds(options_.read_timeout_s);
    left_ = options_.max_request_bytes + kHeaderBytes;
    t_over_limit = false;
  }

  // Waits until the next request starts to arrive: false after the idle timeout, when the server
  // stops (checked every 100 ms) or on an error. A closed connection reads as ready (then EOF).
  bool wait_for_request(const std::atomic<socket_t>& server_socket) const {
    if (off_ < len_) return true;
    const Clock::time_point until = Clock::now() + seconds(options_.idle_timeout_s);
    while (server_socket != INVALID_SOCKET) {
      const int left = ms_until(until);
      if (left == 0) return false;
      const int r = wait_for(fd_, POLLIN, std::min(left, 100));
      if (r != 0) return r > 0;
    }
    return false;
  }

  bool is_readable() const override { return off_ < len_ || wait_for(fd_, POLLIN, ms_until(deadline_)) > 0; }

  bool is_writable() const override {
    return wait_for(fd_, POLLOUT, static_cast<int>(options_.write_timeout_s * 1000)) > 0 && socket_alive(fd_);
  }

  ssize_t read(char* ptr, size_t size) override {
    if (left_ <= 0) {
      t_over_limit = true;
      return -1;
    }
    size = std::min(size, static_cast<size_t>(left_));
    const ssize_t n = read_buffered(ptr, size);
    if (n > 0) left_ -= n;
    return n;
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    while (true) {
      const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);  // a gone client is an error, not SIGPIPE
      if (n >= 0 || errno != EINTR) return n;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t n = sizeof(a);
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&a), &n) == 0) ip = address_string(a, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t n = sizeof(a);
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n) == 0) ip = address_string(a, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  ssize_t read_buffered(char* ptr, size_t size) {
    if (off_ < len_) {
      const size_t n = std::min(size, len_ - off_);
      std::memcpy(ptr, buf_.data() + off_, n);
      off_ += n;
      return static_cast<ssize_t>(n);
    }
    if (wait_for(fd_, POLLIN, ms_until(deadline_)) <= 0) return -1;  // past the deadline: drop it
    if (size >= buf_.size()) return recv_some(ptr, size);
    const ssize_t got = recv_some(buf_.data(), buf_.size());
    if (got <= 0) return got;
    len_ = static_cast<size_t>(got);
    off_ = std::min(size, len_);
    std::memcpy(ptr, buf_.data(), off_);
    return static_cast<ssize_t>(off_);
  }

  ssize_t recv_some(char* p, size_t n) {
    while (true) {
      const ssize_t r = ::recv(fd_, p, n, 0);
      if (r >= 0 || errno != EINTR) return r;
    }
  }

  const int fd_;
  const TransportOptions& options_;
  std::vector<char> buf_;
  size_t off_ = 0, len_ = 0;
  int64_t left_ = 0;  // bytes the current request may still read
  Clock::time_point deadline_ = Clock::now();
};

// After refusing a request whose body was not read: stop sending, then read and drop what the
// client still sends for a moment, so closing does not reset the connection before the client
// has read the answer.
void drain_and_close(int fd) {
  ::shutdown(fd, SHUT_WR);
  const Clock::time_point until = Clock::now() + std::chrono::seconds(2);
  char sink[16 * 1024];
  while (wait_for(fd, POLLIN, ms_until(until)) > 0 && ::recv(fd, sink, sizeof(sink), 0) > 0) {
  }
  ::close(fd);
}

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size() && wait_for(fd, POLLOUT, 1000) > 0) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

void close_connection_after_response() { t_close_after = true; }
bool request_over_size_limit() { return t_over_limit; }

BoundedHttpServer::BoundedHttpServer(TransportOptions options) : options_(options) {
  const size_t threads = static_cast<size_t>(options_.max_connections) + kRefusalThreads;
  new_task_queue = [threads] { return new ConnectionThreads(threads); };
  // The Keep-Alive response header says what the loop below does.
  set_keep_alive_timeout(static_cast<time_t>(std::max(1.0, options_.idle_timeout_s)));
  set_keep_alive_max_count(static_cast<size_t>(options_.max_keep_alive_requests));
}

void BoundedHttpServer::widen_listen_queue() {
  const socket_t s = svr_sock_;
  if (s != INVALID_SOCKET) ::listen(s, SOMAXCONN);  // listen() again on a listening socket sets its queue
}

bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  const int one = 1;
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  struct Open {
    std::atomic<int>& n;
    ~Open() { --n; }
  } open{open_};
  if (++open_ > options_.max_connections) {
    const std::string body = fmt::format(
        R"({{"error":{{"message":"the server has its limit of {} connections open (--max-connections); retry shortly","type":"server_error","param":null,"code":"too_many_connections"}}}})",
        options_.max_connections);
    send_all(sock, fmt::format("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: "
                               "{}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n{}",
                               body.size(), body));
    drain_and_close(sock);
    return false;
  }
  DeadlineStream strm(sock, options_);
  bool ok = false;
  t_close_after = false;
  for (int64_t served = 0; served < options_.max_keep_alive_requests; ++served) {
    if (!strm.wait_for_request(svr_sock_)) break;
    strm.start_request();
    bool closed = false;
    const bool last = served + 1 == options_.max_keep_alive_requests || svr_sock_ == INVALID_SOCKET;
    ok = process_request(strm, last, closed, nullptr);
    if (!ok || closed || t_close_after || last) break;
  }
  if (t_close_after) {
    t_close_after = false;
    drain_and_close(sock);
  } else {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  return ok;
}

}  // namespace nemotron::serve
