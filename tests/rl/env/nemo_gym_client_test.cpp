// The NeMo Gym client against real HTTP servers on 127.0.0.1 (cpp-httplib, an ephemeral port),
// each behaving as a resources server might: correct (and checking its session cookie), slow,
// failing once, answering garbage, always failing, refusing connections.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "core/config_tree.h"
#include "rl/env/math_verifier.h"
#include "rl/env/nemo_gym_client.h"
#include "rl/local_gym_server.h"

namespace nemotron::rl::env {
namespace {

using gym_test::LocalServer;

constexpr const char* kCookie = "TestMathServer___math";

// A stateful math resources server: /seed_session stores the row under a new session id sent as a
// cookie; /verify finds the session by its cookie (400 without it), checks that the row came back
// unchanged, and scores the assistant text of the response like math_with_judge.
struct MathServer {
  std::mutex mu;
  std::map<std::string, nlohmann::json> sessions;
  std::atomic<int> seeds{0}, verifies{0}, verify_failures_left{0};

  void routes(httplib::Server& s) {
    s.Post("/seed_session", [this](const httplib::Request& req, httplib::Response& res) {
      nlohmann::json row = nlohmann::json::parse(req.body);
      if (!row.contains("responses_create_params")) {
        res.status = 422;
        res.set_content(R"({"detail": "responses_create_params: field required"})", "application/json");
        return;
      }
      std::string id = "session";
      id += std::to_string(++seeds);
      {
        std::lock_guard<std::mutex> lock(mu);
        sessions[id] = row;
      }
      res.set_header("Set-Cookie", std::string(kCookie) + "=" + id + "; Path=/; HttpOnly; SameSite=lax");
      res.set_content("{}", "application/json");
    });
    s.Post("/verify", [this](const httplib::Request& req, httplib::Response& res) {
      ++verifies;
      if (verify_failures_left > 0) {
        --verify_failures_left;
        res.status = 500;
        res.set_content("Internal Server Error", "text/plain");
        return;
      }
      const std::string cookie = req.get_header_value("Cookie");
      const std::string key = std::string(kCookie) + "=";
      const size_t at = cookie.find(key);
      nlohmann::json seeded;
      {
        std::lock_guard<std::mutex> lock(mu);
        auto it = at == std::string::npos ? sessions.end() : sessions.find(cookie.substr(at + key.size(), cookie.find(';', at) - at - key.size()));
        if (it == sessions.end()) {
          res.status = 400;
          res.set_content(R"({"detail": "no session"})", "application/json");
          return;
        }
        seeded = it->second;
      }
      nlohmann::json body = nlohmann::json::parse(req.body);
      nlohmann::json row = body;
      row.erase("response");
      if (row != seeded || body["response"]["object"] != "response") {
        res.status = 422;
        res.set_content(R"({"detail": "the row changed between seed_session and verify"})", "application/json");
        return;
      }
      std::string text;
      for (const auto& item : body["response"]["output"])
        if (item["type"] == "message")
          for (const auto& part : item["content"])
            if (part["type"] == "output_text") text += part["text"].get<std::string>();
      const MathVerdict v = verify_math_answer(text, seeded["expected_answer"].get<std::string>());
      body["reward"] = v.reward;
      body["expected_answer"] = seeded["expected_answer"];
      body["extracted_answer"] = v.extracted ? nlohmann::json(*v.extracted) : nlohmann::json(nullptr);
      body["library_reward"] = v.reward;
      body["judge_evaluations"] = nullptr;
      res.set_content(body.dump(), "application/json");
    });
  }
};

nlohmann::json math_row(const std::string& answer) {
  return {{"responses_create_params",
           {{"input", nlohmann::json::array({{{"role", "user"}, {"content", "What is 30 + 2? Put it in \\boxed{}."}}})},
            {"temperature", 1.0}}},
          {"question", "What is 30 + 2?"},
          {"expected_answer", answer},
          {"agent_ref", {{"type", "responses_api_agents"}, {"name", "math_with_judge_simple_agent"}}}};
}

NemoGymClientConfig fast_config(const std::string& url, int64_t retries) {
  NemoGymClientConfig c;
  c.url = url;
  c.timeout_s = 0.3;
  c.max_retries = retries;
  c.backoff_s = 0.01;
  return c;
}

TEST(NemoGymClient, correct_server_rewards_through_seed_session_and_verify_with_the_session_cookie) {
  MathServer math;
  LocalServer server([&](httplib::Server& s) { math.routes(s); });
  NemoGymClient client(fast_config(server.url(), 0));
  GymVerifyResult right = client.verify(math_row("32"), "30 + 2 = 32, so \\boxed{32}.", "1");
  ASSERT_TRUE(right.ok) << right.error;
  EXPECT_EQ(right.reward, 1.0);
  EXPECT_EQ(right.attempts, 2);
  EXPECT_EQ(right.reply["extracted_answer"], "32");
  EXPECT_EQ(right.reply["responses_create_params"], math_row("32")["responses_create_params"]);  // echoed
  GymVerifyResult wrong = client.verify(math_row("32"), "\\boxed{33}", "2");
  ASSERT_TRUE(wrong.ok) << wrong.error;
  EXPECT_EQ(wrong.reward, 0.0);
  EXPECT_EQ(math.seeds, 2);
  EXPECT_EQ(math.verifies, 2);
  // A row the server rejects (422) fails at once: retrying cannot help.
  NemoGymClient retrying(fast_config(server.url(), 3));
  GymVerifyResult rejected = retrying.verify({{"question", "no params"}}, "x", "3");
  EXPECT_FALSE(rejected.ok);
  EXPECT_EQ(rejected.attempts, 1);
  EXPECT_NE(rejected.error.find("POST /seed_session: HTTP 422"), std::string::npos) << rejected.error;
}

TEST(NemoGymClient, a_server_that_never_answers_in_time_fails_after_the_retries) {
  LocalServer server([](httplib::Server& s) {
    s.Post("/seed_session", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(900));
      res.set_content("{}", "application/json");
    });
  });
  NemoGymClient client(fast_config(server.url(), 1));
  GymVerifyResult r = client.verify(math_row("32"), "\\boxed{32}", "1");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.reward, 0.0);
  EXPECT_EQ(r.attempts, 2);
  EXPECT_NE(r.error.find("within the 0.3 s timeout"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("after 2 attempts"), std::string::npos) << r.error;
}

TEST(NemoGymClient, a_500_is_retried_and_the_retry_keeps_the_session) {
  MathServer math;
  math.verify_failures_left = 2;
  LocalServer server([&](httplib::Server& s) { math.routes(s); });
  NemoGymClient client(fast_config(server.url(), 2));
  GymVerifyResult r = client.verify(math_row("32"), "\\boxed{32}", "1");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.reward, 1.0);
  EXPECT_EQ(r.attempts, 4);  // seed, verify (500), verify (500), verify
  EXPECT_EQ(math.seeds, 1);
  // With fewer retries than failures the row fails, naming the status.
  math.verify_failures_left = 5;
  GymVerifyResult failed = NemoGymClient(fast_config(server.url(), 1)).verify(math_row("32"), "\\boxed{32}", "2");
  EXPECT_FALSE(failed.ok);
  EXPECT_NE(failed.error.find("POST /verify: HTTP 500: Internal Server Error (after 2 attempts)"), std::string::npos)
      << failed.error;
}

TEST(NemoGymClient, malformed_json_and_a_reply_without_reward_fail_the_row) {
  std::atomic<int> verifies{0};
  LocalServer server([&](httplib::Server& s) {
    s.Post("/seed_session", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
    s.Post("/verify", [&](const httplib::Request&, httplib::Response& res) {
      ++verifies;
      res.set_content("{\"reward\": 1.0,", "application/json");
    });
    s.Post("/prefix/seed_session", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
    s.Post("/prefix/verify", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"extracted_answer\": \"32\"}", "application/json");
    });
  });
  GymVerifyResult r = NemoGymClient(fast_config(server.url(), 2)).verify(math_row("32"), "\\boxed{32}", "1");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.reward, 0.0);
  EXPECT_EQ(verifies, 3);
  EXPECT_NE(r.error.find("POST /verify: the reply is not JSON: {\"reward\": 1.0,"), std::string::npos) << r.error;
  GymVerifyResult no_reward = NemoGymClient(fast_config(server.url() + "/prefix/", 0)).verify(math_row("32"), "x", "2");
  EXPECT_FALSE(no_reward.ok);
  EXPECT_NE(no_reward.error.find("no numeric \"reward\" (keys: extracted_answer)"), std::string::npos) << no_reward.error;
}

TEST(NemoGymClient, environment_counts_rows_of_a_failing_server_as_failed_and_routes_by_agent_ref) {
  MathServer math;
  LocalServer good([&](httplib::Server& s) { math.routes(s); });
  LocalServer bad([](httplib::Server& s) {
    s.Post("/seed_session", [](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_content("Service Unavailable", "text/plain");
    });
  });
  std::string refused;
  {
    LocalServer gone([](httplib::Server&) {});
    refused = gone.url();
  }
  nlohmann::json options = {{"url", bad.url()},
                            {"servers", {{"math_with_judge_simple_agent", good.url()}, {"offline_agent", refused}}},
                            {"timeout_s", 0.3},
                            {"max_retries", 2},
                            {"backoff_s", 0.01},
                            {"max_concurrency", 4}};
  ConfigReader r(options, "rl.yaml", "env");
  std::unique_ptr<Environment> env = make_environment("nemo_gym", r);
  std::vector<nlohmann::json> rows = {math_row("32"), math_row("32"), math_row("32"), math_row("32")};
  rows[1]["agent_ref"]["name"] = "unknown_agent";  // falls back to url: the failing server
  rows[2]["agent_ref"]["name"] = "offline_agent";
  std::vector<EnvRow> batch = {{&rows[0], "\\boxed{32}"}, {&rows[1], "\\boxed{32}"}, {&rows[2], "\\boxed{32}"},
                               {&rows[3], "\\boxed{31}"}};
  std::vector<EnvResult> res = env->score(batch);
  ASSERT_EQ(res.size(), 4u);
  EXPECT_FALSE(res[0].failed);
  EXPECT_EQ(res[0].reward, 1.0);
  EXPECT_EQ(res[0].info["extracted_answer"], "32");
  EXPECT_TRUE(res[1].failed);
  EXPECT_EQ(res[1].reward, 0.0);
  EXPECT_EQ(res[1].info["attempts"], 3);
  EXPECT_NE(res[1].info["error"].get<std::string>().find("HTTP 503"), std::string::npos);
  EXPECT_TRUE(res[2].failed);
  EXPECT_NE(res[2].info["error"].get<std::string>().find("cannot connect"), std::string::npos) << res[2].info.dump();
  EXPECT_FALSE(res[3].failed);
  EXPECT_EQ(res[3].reward, 0.0);
  EnvStats stats;
  stats.add(res);
  EXPECT_EQ(stats.failed, 2);
  EXPECT_DOUBLE_EQ(stats.mean_reward(), 0.25);
}

}  // namespace
}  // namespace nemotron::rl::env
