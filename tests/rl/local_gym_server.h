// Real HTTP servers on 127.0.0.1 (cpp-httplib on an ephemeral port) for the NeMo Gym client's
// tests: LocalServer runs any routes; FaultGymServer is a resources server that scores a
// completion by its byte parity (as grpo_test_env.h's ParityEnvironment does) and injects the
// fault its `fault_of` picks for a rollout, by the rollout's response id or its text: an HTTP 500,
// a reply later than the client's timeout, malformed JSON, a NaN literal or a string for the
// reward. down_url() is the address of a server that has gone: connections are refused.
#pragma once
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace nemotron::rl::gym_test {

class LocalServer {
 public:
  explicit LocalServer(const std::function<void(httplib::Server&)>& routes) {
    routes(server_);
    port_ = server_.bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() does nothing to a server not yet running, which would then block join() for ever.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LocalServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// A loopback address nothing listens on: a server that was there and has stopped.
inline std::string down_url() {
  LocalServer gone([](httplib::Server&) {});
  return gone.url();
}

enum class Fault { none, http_500, hang, malformed_json, nan_reward, string_reward };

struct GymRollout {
  int64_t id = 0;    // the number in the response id "resp_<id>": the row's place in the run's scoring
  std::string text;  // the completion
};

class FaultGymServer {
 public:
  // `hang_s`: how long a `hang` reply waits (longer than the client's timeout_s).
  explicit FaultGymServer(std::function<Fault(const GymRollout&)> fault_of, double hang_s = 0.6)
      : fault_of_(std::move(fault_of)), hang_s_(hang_s), server_([this](httplib::Server& s) { routes(s); }) {}
  std::string url() const { return server_.url(); }
  int verifies() const { return verifies_; }

 private:
  void routes(httplib::Server& s) {
    s.Post("/seed_session", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
    s.Post("/verify", [this](const httplib::Request& req, httplib::Response& res) {
      ++verifies_;
      nlohmann::json body = nlohmann::json::parse(req.body);
      GymRollout r;
      r.id = std::stoll(body["response"]["id"].get<std::string>().substr(5));  // "resp_00000012"
      for (const auto& item : body["response"]["output"])
        for (const auto& part : item["content"]) r.text += part["text"].get<std::string>();
      const double reward = r.text.size() % 2 == 0 ? 1.0 : 0.0;
      switch (fault_of_(r)) {
        case Fault::none:
          body["reward"] = reward;
          res.set_content(body.dump(), "application/json");
          return;
        case Fault::http_500:
          res.status = 500;
          res.set_content("Internal Server Error", "text/plain");
          return;
        case Fault::hang:
          std::this_thread::sleep_for(std::chrono::duration<double>(hang_s_));
          res.set_content(R"({"reward": 1.0})", "application/json");
          return;
        case Fault::malformed_json:
          res.set_content(R"({"reward": 1.0, "extracted_answer": )", "application/json");
          return;
        case Fault::nan_reward:  // what Python's json.dumps writes for float("nan")
          res.set_content(R"({"reward": NaN})", "application/json");
          return;
        case Fault::string_reward:
          body["reward"] = "0.5";
          res.set_content(body.dump(), "application/json");
          return;
      }
    });
  }

  std::function<Fault(const GymRollout&)> fault_of_;
  double hang_s_;
  std::atomic<int> verifies_{0};
  LocalServer server_;  // last: it serves only once the members above exist
};

}  // namespace nemotron::rl::gym_test
