// Environment faults are never silent (issue 25 §4), at the environment's level, against real
// HTTP servers on 127.0.0.1: a server that is down, answers 500, hangs past the client's timeout,
// sends malformed JSON, a NaN or a string for the reward leaves its rows unscored with a kind and
// the reason (never a reward of 0 that looks scored), one entry per kind; the health check names
// the key and the URL of a server that does not answer, and fails fast.
#include <gtest/gtest.h>

#include <chrono>

#include "core/config_tree.h"
#include "core/error.h"
#include "rl/env/environment.h"
#include "rl/env/nemo_gym_client.h"
#include "rl/local_gym_server.h"

namespace nemotron::rl::env {
namespace {

using gym_test::down_url;
using gym_test::Fault;
using gym_test::FaultGymServer;
using gym_test::GymRollout;
using gym_test::LocalServer;

nlohmann::json gym_row(const std::string& agent = "math_agent") {
  return {{"responses_create_params", {{"input", "What is 1 + 1?"}}},
          {"expected_answer", "2"},
          {"agent_ref", {{"type", "responses_api_agents"}, {"name", agent}}}};
}

std::unique_ptr<Environment> gym_env(nlohmann::json options) {
  options["timeout_s"] = 0.25;
  options["max_retries"] = 1;
  options["backoff_s"] = 0.01;
  ConfigReader r(options, "rl.yaml", "env");
  return make_environment("nemo_gym", r);
}

// The completion names the fault the server injects for it.
Fault fault_named(const GymRollout& r) {
  if (r.text == "500") return Fault::http_500;
  if (r.text == "hang") return Fault::hang;
  if (r.text == "malformed") return Fault::malformed_json;
  if (r.text == "nan") return Fault::nan_reward;
  if (r.text == "string") return Fault::string_reward;
  return Fault::none;
}

TEST(EnvFaults, each_fault_leaves_its_row_unscored_with_its_kind_and_reason) {
  FaultGymServer server(fault_named);
  const std::string down = down_url();
  std::unique_ptr<Environment> env = gym_env({{"url", server.url()}, {"servers", {{"offline_agent", down}}}});
  const nlohmann::json row = gym_row(), offline = gym_row("offline_agent");
  const std::vector<EnvRow> batch = {{&row, "good"},   {&row, "500"},    {&row, "hang"},     {&row, "malformed"},
                                     {&row, "nan"},    {&row, "string"}, {&offline, "good"}, {&row, "500"},
                                     {&row, "odd"}};
  const std::vector<EnvResult> res = env->score(batch);
  ASSERT_EQ(res.size(), batch.size());
  EXPECT_FALSE(res[0].failed);
  EXPECT_EQ(res[0].reward, 1.0);  // "good": 4 bytes
  EXPECT_FALSE(res[8].failed);
  EXPECT_EQ(res[8].reward, 0.0);  // "odd": a real 0, scored
  struct Want {
    size_t row;
    std::string kind, reason;
  };
  const std::vector<Want> want = {
      {1, "HTTP 500", "POST /verify: HTTP 500: Internal Server Error (after 2 attempts)"},
      {2, "timeout", "POST /verify: no complete reply within the 0.25 s timeout"},
      {3, "malformed reply", "POST /verify: the reply is not JSON: {\"reward\": 1.0, \"extracted_answer\": "},
      {4, "malformed reply", "POST /verify: the reply is not JSON: {\"reward\": NaN}"},
      {5, "bad reward", "POST /verify: \"reward\" is \"0.5\" (string); expected a finite number"},
      {6, "unreachable", "POST /seed_session: cannot connect to " + down + " (after 2 attempts)"},
  };
  for (const Want& w : want) {
    const EnvResult& r = res[w.row];
    EXPECT_TRUE(r.failed) << w.row;
    EXPECT_EQ(r.reward, 0.0) << w.row;
    EXPECT_EQ(r.error_kind, w.kind) << w.row;
    EXPECT_NE(r.info.value("error", "").find(w.reason), std::string::npos) << w.row << ": " << r.info.dump();
  }
  // One entry per kind, in order of first appearance, with its rows and the first reason.
  const std::vector<UnscoredKind> kinds = unscored_by_kind(res);
  ASSERT_EQ(kinds.size(), 5u);
  EXPECT_EQ(kinds[0].kind, "HTTP 500");
  EXPECT_EQ(kinds[0].rows, 2);
  EXPECT_EQ(kinds[1].kind, "timeout");
  EXPECT_EQ(kinds[2].kind, "malformed reply");
  EXPECT_EQ(kinds[2].rows, 2);
  EXPECT_NE(kinds[2].example.find("extracted_answer"), std::string::npos) << kinds[2].example;
  EXPECT_EQ(kinds[3].kind, "bad reward");
  EXPECT_EQ(kinds[4].kind, "unreachable");
  EXPECT_EQ(kinds[4].rows, 1);
  EXPECT_NE(kinds[4].example.find("cannot connect to " + down), std::string::npos) << kinds[4].example;
}

TEST(EnvFaults, a_null_reward_and_an_infinite_one_are_faults_not_zeros) {
  LocalServer server([](httplib::Server& s) {
    s.Post("/seed_session", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
    s.Post("/verify", [](const httplib::Request& req, httplib::Response& res) {
      const bool null = req.body.find("\"null please\"") != std::string::npos;
      res.set_content(null ? R"({"reward": null})" : R"({"reward": 1e999})", "application/json");
    });
  });
  std::unique_ptr<Environment> env = gym_env({{"url", server.url()}});
  const nlohmann::json row = gym_row();
  const std::vector<EnvResult> res = env->score(std::vector<EnvRow>{{&row, "null please"}, {&row, "inf please"}});
  for (const EnvResult& r : res) {
    EXPECT_TRUE(r.failed) << r.info.dump();
    EXPECT_TRUE(r.error_kind == "bad reward" || r.error_kind == "malformed reply") << r.error_kind;
  }
  EXPECT_NE(res[0].info.value("error", "").find("\"reward\" is null"), std::string::npos) << res[0].info.dump();
}

std::string health_error(const Environment& env) {
  try {
    env.check_health();
  } catch (const InputError& e) {
    return std::string("(an InputError, not an Error) ") + e.what();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EnvFaults, health_check_names_the_key_and_url_of_a_server_that_is_down_and_fails_fast) {
  const std::string down = down_url();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string why = health_error(*gym_env({{"url", down}}));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(why, "rl.yaml: env.url: the NeMo Gym resources server at " + down + " does not answer: GET /: cannot "
                 "connect to " + down + " (after 2 attempts); start it or fix the URL (checked before the first step; "
                 "nothing was trained or written)");
  EXPECT_LT(seconds, 1.0);
  // A server of `servers` is checked too, named by its key.
  FaultGymServer up([](const GymRollout&) { return Fault::none; });
  const std::string why_servers = health_error(*gym_env({{"url", up.url()}, {"servers", {{"judge", down}}}}));
  EXPECT_EQ(why_servers.rfind("rl.yaml: env.servers.judge: the NeMo Gym resources server at " + down, 0), 0u)
      << why_servers;
  // A resources server has no GET route: its 404 is an answer.
  EXPECT_EQ(health_error(*gym_env({{"url", up.url()}})), "");
  // An in-process environment has nothing to check.
  nlohmann::json none = nlohmann::json::object();
  ConfigReader r(none, "rl.yaml", "env");
  EXPECT_EQ(health_error(*make_environment("math", r)), "");
}

TEST(EnvFaults, health_check_fails_on_a_5xx_and_on_a_server_that_hangs) {
  LocalServer unavailable([](httplib::Server& s) {
    s.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_content("upstream down", "text/plain");
    });
  });
  EXPECT_NE(health_error(*gym_env({{"url", unavailable.url()}})).find("GET /: HTTP 503: upstream down (after 2 attempts)"),
            std::string::npos);
  LocalServer hangs([](httplib::Server& s) {
    s.Get("/base/", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      res.set_content("late", "text/plain");
    });
  });
  const std::string why = health_error(*gym_env({{"url", hangs.url() + "/base"}}));
  EXPECT_NE(why.find("env.url: the NeMo Gym resources server at " + hangs.url() + "/base does not answer: GET "
                     "/base/: no complete reply within the 0.25 s timeout"),
            std::string::npos)
      << why;
}

}  // namespace
}  // namespace nemotron::rl::env
