#include <gtest/gtest.h>

#include "core/config_tree.h"
#include "core/error.h"
#include "data/corpus_skills.h"
#include "data/rl_prep.h"
#include "rl/env/builtin_environments.h"
#include "rl/env/environment.h"

namespace nemotron::rl::env {
namespace {

std::vector<EnvResult> score(const std::string& name, const std::vector<nlohmann::json>& rows,
                             const std::vector<std::string>& completions, nlohmann::json options = nlohmann::json::object()) {
  ConfigReader r(options, "rl.yaml", "env");
  std::unique_ptr<Environment> env = make_environment(name, r);
  EXPECT_EQ(env->name(), name);
  std::vector<EnvRow> batch;
  for (size_t i = 0; i < rows.size(); ++i) batch.push_back({&rows[i], completions[i]});
  return env->score(batch);
}

std::string input_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(Environment, math_scores_a_batch_in_order_and_counts_rows_without_an_answer_as_failed) {
  const std::vector<nlohmann::json> rows = {
      {{"question", "1+1?"}, {"expected_answer", "2"}},
      {{"ground_truth", "\\frac{1}{2}"}},  // NeMo RL's extra_env_info
      {{"expected_answer", 7}},            // a number, not a string
      {{"question", "no answer field"}}};
  const auto res = score("math", rows, {"so \\boxed{2}", "It is 0.5.", "#### 8", "\\boxed{1}"});
  ASSERT_EQ(res.size(), 4u);
  EXPECT_EQ(res[0].reward, 1.0);
  EXPECT_EQ(res[0].info["extracted_answer"], "2");
  EXPECT_EQ(res[1].reward, 1.0);
  EXPECT_EQ(res[2].reward, 0.0);
  EXPECT_FALSE(res[2].failed);
  EXPECT_EQ(res[2].info["expected_answer"], "7");
  EXPECT_TRUE(res[3].failed);
  EXPECT_EQ(res[3].reward, 0.0);
  EXPECT_NE(res[3].info["error"].get<std::string>().find("no expected_answer"), std::string::npos);
  EnvStats stats;
  stats.add(res);
  EXPECT_EQ(stats.rows, 4);
  EXPECT_EQ(stats.failed, 1);
  EXPECT_DOUBLE_EQ(stats.mean_reward(), 0.5);
}

TEST(Environment, arithmetic_skill_wants_the_answer_line_the_sft_data_teaches) {
  const nlohmann::json row = {{"expected_answer", "42"}};
  const std::vector<nlohmann::json> rows(6, row);
  const auto res = score("arithmetic", rows,
                         {"17 + 25 = 42.\nThe answer is 42.",       // the taught format
                          "The answer is 42.\n",                    // trailing newline is fine
                          "The answer is 41.",                      // wrong number
                          "The answer is 42.\nBut maybe 43.",       // not the last line
                          "It is 42.",                              // no answer line
                          "The answer is 42"});                     // no full stop
  EXPECT_EQ(res[0].reward, 1.0);
  EXPECT_EQ(res[0].info["format_ok"], true);
  EXPECT_EQ(res[1].reward, 1.0);
  EXPECT_EQ(res[2].reward, 0.0);
  EXPECT_EQ(res[2].info["extracted_answer"], "41");
  EXPECT_EQ(res[3].reward, 0.0);
  EXPECT_EQ(res[3].info["format_ok"], false);
  EXPECT_EQ(res[4].reward, 0.0);
  EXPECT_EQ(res[5].reward, 0.0);
  for (const EnvResult& r : res) EXPECT_FALSE(r.failed);
  // Without require_final_line the number alone counts.
  const auto loose = score("arithmetic", {row}, {"The answer is 42.\nBut maybe 43."}, {{"require_final_line", false}});
  EXPECT_EQ(loose[0].reward, 1.0);
  // format_reward: partial credit for the taught format with a wrong number, nothing without it.
  const auto shaped = score("arithmetic", {row, row, row}, {"The answer is 41.", "The answer is 42.", "It is 41."},
                            {{"format_reward", 0.25}});
  EXPECT_EQ(shaped[0].reward, 0.25);
  EXPECT_EQ(shaped[1].reward, 1.0);
  EXPECT_EQ(shaped[2].reward, 0.0);
  const auto negative = score("arithmetic", {{{"expected_answer", "-5"}}}, {"The answer is -5."});
  EXPECT_EQ(negative[0].reward, 1.0);
  const auto bad = score("arithmetic", {{{"expected_answer", "x"}}}, {"The answer is 5."});
  EXPECT_TRUE(bad[0].failed);
}

TEST(Environment, registry_names_unknown_environments_and_options) {
  nlohmann::json none = nlohmann::json::object();
  ConfigReader r(none, "rl.yaml", "env");
  EXPECT_EQ(input_error([&] { make_environment("chess", r); }),
            "rl.yaml: env: unknown environment \"chess\" (built in: math, arithmetic, nemo_gym)");
  nlohmann::json extra = {{"strictness", 1}};
  ConfigReader r2(extra, "rl.yaml", "env");
  EXPECT_NE(input_error([&] { make_environment("math", r2); }).find("strictness"), std::string::npos);
  nlohmann::json no_url = nlohmann::json::object();
  ConfigReader r3(no_url, "rl.yaml", "env");
  EXPECT_NE(input_error([&] { make_environment("nemo_gym", r3); }).find("env.url"), std::string::npos);
  nlohmann::json bad_url = {{"url", "localhost:8000"}};
  ConfigReader r4(bad_url, "rl.yaml", "env");
  EXPECT_NE(input_error([&] { make_environment("nemo_gym", r4); }).find("expected http://host:port"), std::string::npos);
}

}  // namespace
}  // namespace nemotron::rl::env

namespace nemotron::rl::env {
namespace {

// The bundled RL rows and the SFT data's worked solutions meet in the arithmetic environment: the
// solution SFT teaches for a problem scores 1 on that problem's RL row, a solution to another
// problem (with another answer) scores 0.
TEST(Environment, arithmetic_rewards_the_sft_solutions_on_the_bundled_rl_rows) {
  data::CorpusConfig cfg;
  cfg.first_problem = 2000000;
  cfg.num_examples = 200;
  const std::vector<data::OrderedJson> generated = data::generate_rl_rows(cfg);
  std::vector<nlohmann::json> rows;
  for (const data::OrderedJson& r : generated) rows.push_back(nlohmann::json::parse(r.dump()));
  std::vector<EnvRow> right, wrong;
  for (size_t i = 0; i < rows.size(); ++i) {
    const data::Problem p = data::make_problem(cfg.seed, cfg.first_problem + static_cast<int64_t>(i), cfg.knobs);
    ASSERT_EQ(rows[i]["expected_answer"], std::to_string(p.answer));
    ASSERT_EQ(rows[i]["responses_create_params"]["input"][0]["content"], p.question);
    right.push_back({&rows[i], p.solution});
    const data::Problem other = data::make_problem(cfg.seed, cfg.first_problem + static_cast<int64_t>(i) + 1000, cfg.knobs);
    if (other.answer != p.answer) wrong.push_back({&rows[i], other.solution});
  }
  ArithmeticSkillEnvironment env;
  EnvStats good, bad;
  good.add(env.score(right));
  bad.add(env.score(wrong));
  EXPECT_EQ(good.rows, 200);
  EXPECT_DOUBLE_EQ(good.mean_reward(), 1.0);
  EXPECT_GT(bad.rows, 150);
  EXPECT_DOUBLE_EQ(bad.mean_reward(), 0.0);
  EXPECT_EQ(good.failed + bad.failed, 0);
}

}  // namespace
}  // namespace nemotron::rl::env
