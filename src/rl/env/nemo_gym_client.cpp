#include "rl/env/nemo_gym_client.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "core/json_limits.h"

namespace nemotron::rl::env {

namespace {

// The session cookies of one rollout (reference/pipeline-and-rl.md §3.3): opaque name=value pairs,
// each replaced by the server's next Set-Cookie for that name, removed by Max-Age=0.
class CookieJar {
 public:
  void update(const httplib::Headers& headers) {
    auto [begin, end] = headers.equal_range("Set-Cookie");
    for (auto it = begin; it != end; ++it) {
      const std::string& v = it->second;
      const std::string pair = v.substr(0, v.find(';'));
      const size_t eq = pair.find('=');
      if (eq == std::string::npos || eq == 0) continue;
      const std::string name = pair.substr(0, eq);
      std::string lower = v;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (lower.find("max-age=0") != std::string::npos) cookies_.erase(name);
      else cookies_[name] = pair.substr(eq + 1);
    }
  }
  std::string header() const {
    std::string out;
    for (const auto& [name, value] : cookies_) out += (out.empty() ? "" : "; ") + name + "=" + value;
    return out;
  }

 private:
  std::map<std::string, std::string> cookies_;
};

void set_timeouts(httplib::Client& cli, double timeout_s) {
  const auto sec = static_cast<time_t>(timeout_s);
  const auto usec = static_cast<time_t>(std::llround((timeout_s - static_cast<double>(sec)) * 1e6));
  cli.set_connection_timeout(sec, usec);
  cli.set_read_timeout(sec, usec);
  cli.set_write_timeout(sec, usec);
}

struct Attempt {
  bool ok = false, retryable = true;
  nlohmann::json body;
  std::string error, kind;
};

std::string snippet(const std::string& body) {
  std::string s = body.substr(0, 200);
  std::replace(s.begin(), s.end(), '\n', ' ');
  return body.size() > 200 ? s + "..." : s;
}

// The kind of a transport failure (GymVerifyResult::kind).
std::string kind_of(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection: return "unreachable";
    case httplib::Error::ConnectionTimeout:
    case httplib::Error::Read: return "timeout";
    default: return "transport";
  }
}

// httplib's one-word error names, said for a user reading the log.
std::string describe(httplib::Error e, const std::string& origin, double timeout_s) {
  switch (e) {
    case httplib::Error::Connection: return fmt::format("cannot connect to {}", origin);
    case httplib::Error::ConnectionTimeout: return fmt::format("connecting to {} timed out after {} s", origin, timeout_s);
    case httplib::Error::Read: return fmt::format("no complete reply within the {} s timeout (read failed)", timeout_s);
    case httplib::Error::Write: return "sending the request failed (write)";
    default: return httplib::to_string(e);
  }
}

// One POST of `body` as JSON; the reply must be HTTP 200 with a JSON object.
Attempt post_once(httplib::Client& cli, const std::string& origin, double timeout_s, const std::string& path,
                  const std::string& body, CookieJar& jar) {
  Attempt a;
  httplib::Headers headers;
  if (const std::string c = jar.header(); !c.empty()) headers.emplace("Cookie", c);
  httplib::Result res = cli.Post(path, headers, body, "application/json");
  if (!res) {
    a.error = fmt::format("POST {}: {}", path, describe(res.error(), origin, timeout_s));
    a.kind = kind_of(res.error());
    return a;
  }
  jar.update(res->headers);
  if (res->status != 200) {
    a.retryable = res->status >= 500 || res->status == 408 || res->status == 429;
    a.error = fmt::format("POST {}: HTTP {}: {}", path, res->status, snippet(res->body));
    a.kind = fmt::format("HTTP {}", res->status);
    return a;
  }
  a.kind = "malformed reply";
  try {
    a.body = parse_json<nlohmann::json>(res->body, "the reply");
  } catch (const InputError&) {
    a.error = fmt::format("POST {}: the reply is not JSON: {}", path, snippet(res->body));
    return a;
  }
  if (!a.body.is_object()) {
    a.error = fmt::format("POST {}: expected a JSON object, got {}", path, snippet(res->body));
    return a;
  }
  a.kind.clear();
  a.ok = true;
  return a;
}

}  // namespace

void NemoGymClientConfig::validate(const std::string& where) const {
  if (!url.starts_with("http://") && !url.starts_with("https://"))
    throw InputError(fmt::format("{}.url: expected http://host:port of a NeMo Gym resources server, got \"{}\"", where, url));
  if (!(timeout_s > 0)) throw InputError(fmt::format("{}.timeout_s: expected a positive number, got {}", where, timeout_s));
  if (max_retries < 0) throw InputError(fmt::format("{}.max_retries: expected >= 0, got {}", where, max_retries));
  if (!(backoff_s >= 0)) throw InputError(fmt::format("{}.backoff_s: expected >= 0, got {}", where, backoff_s));
}

nlohmann::json make_gym_response(const std::string& completion, const std::string& id, const nlohmann::json& row) {
  const nlohmann::json* params = row.contains("responses_create_params") ? &row["responses_create_params"] : nullptr;
  auto param = [&](const char* key, nlohmann::json fallback) {
    return params && params->is_object() && params->contains(key) ? (*params)[key] : fallback;
  };
  nlohmann::json text = {{"type", "output_text"}, {"text", completion}, {"annotations", nlohmann::json::array()}};
  nlohmann::json message = {{"id", "msg_" + id},       {"type", "message"},
                            {"role", "assistant"},     {"status", "completed"},
                            {"content", nlohmann::json::array({text})}};
  return {{"id", "resp_" + id},
          {"object", "response"},
          {"created_at", static_cast<double>(std::time(nullptr))},
          {"model", param("model", "nemotron")},
          {"status", "completed"},
          {"error", nullptr},
          {"incomplete_details", nullptr},
          {"instructions", param("instructions", nullptr)},
          {"metadata", param("metadata", nlohmann::json::object())},
          {"output", nlohmann::json::array({message})},
          {"parallel_tool_calls", param("parallel_tool_calls", true)},
          {"temperature", param("temperature", nullptr)},
          {"tool_choice", param("tool_choice", "auto")},
          {"tools", param("tools", nlohmann::json::array())},
          {"top_p", param("top_p", nullptr)}};
}

NemoGymClient::NemoGymClient(NemoGymClientConfig cfg) : cfg_(std::move(cfg)) {
  const size_t host = cfg_.url.find("://") + 3;
  const size_t slash = cfg_.url.find('/', host);
  origin_ = cfg_.url.substr(0, slash);
  prefix_ = slash == std::string::npos ? "" : cfg_.url.substr(slash);
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
}

GymVerifyResult NemoGymClient::verify(const nlohmann::json& row, const std::string& completion,
                                      const std::string& response_id) const {
  GymVerifyResult out;
  try {
    httplib::Client cli(origin_);
    set_timeouts(cli, cfg_.timeout_s);
    CookieJar jar;
    auto post = [&](const std::string& endpoint, const nlohmann::json& body) -> std::optional<nlohmann::json> {
      const std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      for (int64_t attempt = 0;; ++attempt) {
        if (attempt > 0)
          std::this_thread::sleep_for(std::chrono::duration<double>(cfg_.backoff_s * std::ldexp(1.0, static_cast<int>(attempt - 1))));
        ++out.attempts;
        Attempt a = post_once(cli, origin_, cfg_.timeout_s, prefix_ + endpoint, text, jar);
        if (a.ok) return std::move(a.body);
        out.error = a.error;
        out.kind = a.kind;
        if (!a.retryable || attempt >= cfg_.max_retries) {
          if (attempt > 0) out.error += fmt::format(" (after {} attempts)", attempt + 1);
          return std::nullopt;
        }
      }
    };
    if (!post("/seed_session", row)) return out;
    nlohmann::json request = row;
    request["response"] = make_gym_response(completion, response_id, row);
    std::optional<nlohmann::json> reply = post("/verify", request);
    if (!reply) return out;
    const auto it = reply->find("reward");
    if (it == reply->end() || !it->is_number() || !std::isfinite(it->get<double>())) {
      // A NaN, a string or a null is a fault of the server, never a reward of 0.
      out.kind = "bad reward";
      out.error = it == reply->end()
                      ? fmt::format("POST /verify: the reply has no numeric \"reward\" (keys: {})", snippet([&] {
                                      std::string k;
                                      for (const auto& [key, v] : reply->items()) k += (k.empty() ? "" : ", ") + key;
                                      return k;
                                    }()))
                      : fmt::format("POST /verify: \"reward\" is {} ({}); expected a finite number",
                                    snippet(it->dump()), it->type_name());
      return out;
    }
    out.reward = it->get<double>();
    out.reply = std::move(*reply);
    out.ok = true;
    out.error.clear();
    out.kind.clear();
  } catch (const std::exception& e) {  // never out of a run: the row is scored as failed
    out.ok = false;
    out.error = std::string("NeMo Gym client: ") + e.what();
    out.kind = "client error";
  }
  return out;
}

std::string NemoGymClient::health_error() const {
  std::string error;
  try {
    httplib::Client cli(origin_);
    set_timeouts(cli, cfg_.timeout_s);
    const std::string path = prefix_ + "/";
    for (int64_t attempt = 0;; ++attempt) {
      if (attempt > 0) {
        const double wait_s = cfg_.backoff_s * std::ldexp(1.0, static_cast<int>(attempt - 1));
        std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
      }
      httplib::Result res = cli.Get(path);
      if (res && res->status < 500) return "";
      error = res ? fmt::format("GET {}: HTTP {}: {}", path, res->status, snippet(res->body))
                  : fmt::format("GET {}: {}", path, describe(res.error(), origin_, cfg_.timeout_s));
      if (attempt >= cfg_.max_retries) {
        if (attempt > 0) error += fmt::format(" (after {} attempts)", attempt + 1);
        return error;
      }
    }
  } catch (const std::exception& e) {
    return std::string("NeMo Gym client: ") + e.what();
  }
}

NemoGymEnvironment::NemoGymEnvironment(ConfigReader& r) {
  base_.url = r.get_string("url", "");
  const nlohmann::json& servers = r.get_raw("servers");
  if (!servers.is_null() && !servers.is_object())
    r.fail("servers", "expected a mapping {agent or server name: http://host:port}");
  for (const auto& [name, url] : servers.items()) {
    if (!url.is_string()) r.fail("servers", fmt::format("{}: expected a URL string, got {}", name, url.dump()));
    servers_[name] = url.get<std::string>();
  }
  if (base_.url.empty() && servers_.empty())
    r.fail("url", "missing: give url (the resources server) or servers {agent_ref name: url}");
  base_.timeout_s = r.get_number("timeout_s", base_.timeout_s);
  base_.max_retries = r.get_nonnegative_int("max_retries", base_.max_retries);
  base_.backoff_s = r.get_number("backoff_s", base_.backoff_s);
  max_concurrency_ = r.get_positive_int("max_concurrency", max_concurrency_);
  const std::string where = r.source() + ": " + (r.path().empty() ? std::string("env") : r.path());
  where_ = where;
  if (!base_.url.empty()) base_.validate(where);
  for (const auto& [name, url] : servers_) {
    NemoGymClientConfig c = base_;
    c.url = url;
    c.validate(where + ".servers." + name);
  }
}

void NemoGymEnvironment::check_health() const {
  std::vector<std::pair<std::string, std::string>> urls;  // key, url
  if (!base_.url.empty()) urls.emplace_back("url", base_.url);
  for (const auto& [name, url] : servers_) urls.emplace_back("servers." + name, url);
  for (const auto& [key, url] : urls) {
    NemoGymClientConfig cfg = base_;
    cfg.url = url;
    const std::string why = NemoGymClient(cfg).health_error();
    if (!why.empty())
      throw Error(fmt::format("{}.{}: the NeMo Gym resources server at {} does not answer: {}; start it or fix the "
                              "URL (checked before the first step; nothing was trained or written)",
                              where_, key, url, why));
  }
}

std::vector<EnvResult> NemoGymEnvironment::score(std::span<const EnvRow> rows) {
  std::vector<EnvResult> results(rows.size());
  const int64_t first_id = next_id_;
  next_id_ += static_cast<int64_t>(rows.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < rows.size(); i = next++) {
      EnvResult& r = results[i];
      r.failed = true;
      if (!rows[i].row || !rows[i].row->is_object()) {
        r.error_kind = "not a NeMo Gym row";
        r.info["error"] = "no dataset row (a NeMo Gym row is a JSON object)";
        continue;
      }
      const nlohmann::json& row = *rows[i].row;
      std::string url = base_.url;
      if (row.contains("agent_ref") && row["agent_ref"].is_object() && row["agent_ref"].contains("name") &&
          row["agent_ref"]["name"].is_string()) {
        const auto it = servers_.find(row["agent_ref"]["name"].get<std::string>());
        if (it != servers_.end()) url = it->second;
      }
      if (url.empty()) {
        r.error_kind = "no server for the row";
        r.info["error"] = "no server for this row: its agent_ref.name is not in env.servers and env.url is not set";
        continue;
      }
      NemoGymClientConfig cfg = base_;
      cfg.url = url;
      GymVerifyResult v = NemoGymClient(cfg).verify(row, rows[i].completion, fmt::format("{:08d}", first_id + static_cast<int64_t>(i)));
      r.info["attempts"] = v.attempts;
      if (!v.ok) {
        r.info["error"] = v.error;
        r.error_kind = v.kind;
        continue;
      }
      r.failed = false;
      r.reward = v.reward;
      for (const char* key : {"extracted_answer", "expected_answer", "library_reward", "reward_components"})
        if (v.reply.contains(key)) r.info[key] = v.reply[key];
    }
  };
  const size_t n_threads = std::min<size_t>(static_cast<size_t>(max_concurrency_), rows.size());
  std::vector<std::thread> threads;
  for (size_t t = 1; t < n_threads; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace nemotron::rl::env
