// A client of NeMo Gym resources servers (reference/pipeline-and-rl.md §3): for one rollout it
// POSTs the dataset row to /seed_session, keeps the session cookies the server sets (one jar per
// rollout, replaced by every Set-Cookie), then POSTs the row plus "response" (a Responses-API
// response object holding the completion as one assistant message) to /verify with those cookies,
// and reads "reward" from the reply. Each request has a timeout and is retried with exponential
// backoff on connection errors, timeouts, HTTP 5xx/408/429 and replies that are not a JSON object;
// other 4xx (e.g. Gym's 422 validation errors) fail at once. A failure never throws: it comes back
// as ok = false with the reason and its kind, and the environment returns the row unscored. A
// reward that is not a finite number (NaN, a string, missing) is such a failure, never a 0.
// check_health() asks the server once before training (any HTTP reply below 500 is an answer).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "rl/env/environment.h"

namespace nemotron {
class ConfigReader;
}

namespace nemotron::rl::env {

struct NemoGymClientConfig {
  std::string url;           // the resources server, "http://host:port[/prefix]" (https too)
  double timeout_s = 60;     // per request: connect, send and each read
  int64_t max_retries = 3;   // further attempts of a request after the first
  double backoff_s = 0.5;    // wait before retry k (1-based): backoff_s * 2^(k-1)
  void validate(const std::string& where) const;
};

struct GymVerifyResult {
  bool ok = false;
  double reward = 0;
  nlohmann::json reply;  // the /verify reply (row echoed + reward + environment fields) when ok
  std::string error;     // why it failed: "POST /verify: HTTP 500: ..." / "... timed out" / ...
  // What kind of failure, for a log line per kind: "unreachable", "timeout", "HTTP <status>",
  // "malformed reply" (not JSON / not an object), "bad reward", "transport", "client error".
  std::string kind;
  int64_t attempts = 0;  // requests sent, retries included
};

// The Responses-API response object for a completion: {"id", "object": "response", "output":
// [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text", ...}]}], ...}.
nlohmann::json make_gym_response(const std::string& completion, const std::string& id, const nlohmann::json& row);

class NemoGymClient {
 public:
  explicit NemoGymClient(NemoGymClientConfig cfg);
  // One rollout: /seed_session then /verify, cookies carried. Thread-safe (no shared state).
  GymVerifyResult verify(const nlohmann::json& row, const std::string& completion, const std::string& response_id) const;
  // GET <url>/ with the configured timeout and retries: "" when the server answers with any HTTP
  // status below 500 (a resources server has no route there: 404 is an answer), else the reason
  // ("cannot connect to http://127.0.0.1:9 (after 4 attempts)", "HTTP 503: ...").
  std::string health_error() const;
  const NemoGymClientConfig& config() const { return cfg_; }

 private:
  NemoGymClientConfig cfg_;
  std::string origin_, prefix_;  // "http://host:port" and the path prefix ("" or "/base")
};

// The "nemo_gym" environment: rows go to the resources server named by their `agent_ref.name` in
// `servers` ({name: url}), else to `url`; rows are scored `max_concurrency` at a time.
// Options: url, servers, timeout_s, max_retries, backoff_s, max_concurrency.
class NemoGymEnvironment : public Environment {
 public:
  explicit NemoGymEnvironment(ConfigReader& options);
  const char* name() const override { return "nemo_gym"; }
  std::vector<EnvResult> score(std::span<const EnvRow> rows) override;
  // Every configured server (url and each of servers) answers, or Error naming its key and URL.
  void check_health() const override;

 private:
  std::string where_;  // "<recipe>: env", prefixing the keys in messages
  NemoGymClientConfig base_;
  std::map<std::string, std::string> servers_;
  int64_t max_concurrency_ = 16;
  int64_t next_id_ = 0;
};

}  // namespace nemotron::rl::env
