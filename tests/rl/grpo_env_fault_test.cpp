// Environment faults are never silent (issue 25 §4), in the GRPO loop, against a NeMo Gym
// resources server on 127.0.0.1 that injects faults (tests/rl/local_gym_server.h): each kind of
// fault is logged once per step with its reason, unscored rows are counted in the step record,
// metrics.jsonl and validation, they weigh nothing in the update (the weights equal those of a run
// whose unscored rows carry any other reward, and differ from training them as a real 0), and past
// env.max_unscored_fraction the run stops with an Error before training on the step, keeping its
// last checkpoint and publishing nothing more.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"
#include "rl/grpo_test_env.h"
#include "rl/grpo_trainer.h"
#include "rl/local_gym_server.h"
#include "rl/rollout.h"
#include "test_util.h"

namespace nemotron::rl {
namespace {

namespace fs = std::filesystem;
using gym_test::Fault;
using gym_test::FaultGymServer;
using gym_test::GymRollout;

std::string write_data(const std::string& folder) {
  std::string train, val;
  for (int i = 0; i < 24; ++i) (i % 4 == 3 ? val : train) += grpo_test::question_row(i) + "\n";
  nemotron::testing::write_temp(folder, "train.jsonl", train);
  return fs::path(nemotron::testing::write_temp(folder, "val.jsonl", val)).parent_path().string();
}

std::shared_ptr<env::Environment> gym_environment(const std::string& url) {
  nlohmann::json options = {{"url", url}, {"timeout_s", 5.0}, {"max_retries", 0}, {"backoff_s", 0.0}};
  ConfigReader r(options, "grpo_env_fault_test.yaml", "env");
  return env::make_environment("nemo_gym", r);
}

// Row i of each score() call: unscored (with reward `junk`) when i % 4 < fail_below (2: rows 0
// and 1 of each group, as the fault server below fails them in the first step); else the parity
// reward. With `as_zero`, those rows come back scored with reward 0 instead: what the trainer used
// to make of a failed row.
class ScriptedEnvironment : public env::Environment {
 public:
  ScriptedEnvironment(double junk, bool as_zero, size_t fail_below = 2)
      : junk_(junk), as_zero_(as_zero), fail_below_(fail_below) {}
  const char* name() const override { return "scripted"; }
  std::vector<env::EnvResult> score(std::span<const env::EnvRow> rows) override {
    std::vector<env::EnvResult> out(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      env::EnvResult& e = out[i];
      e.reward = rows[i].completion.size() % 2 == 0 ? 1.0 : 0.0;
      if (i % 4 >= fail_below_) continue;
      e.reward = as_zero_ ? 0.0 : junk_;
      e.failed = !as_zero_;
      e.error_kind = "scripted";
      e.info["error"] = "scripted fault";
    }
    return out;
  }

 private:
  double junk_;
  bool as_zero_;
  size_t fail_below_;
};

struct FaultRun {
  data::Tokenizer tok = data::Tokenizer::load(grpo_test::fixture_tokenizer_path());
  RlConfig cfg;
  model::HybridModel net;
  std::FILE* log = std::tmpfile();
  std::vector<int64_t> published;  // the steps on_saved was called for
  std::unique_ptr<GrpoTrainer> trainer;
  FaultRun(const std::string& data_dir, const std::vector<std::string>& overrides, std::shared_ptr<env::Environment> env)
      : cfg(grpo_test::tiny_grpo_config(tok.vocab_size(), data_dir + "/train.jsonl", data_dir + "/val.jsonl",
                                        overrides, "grpo_env_fault_test.yaml")),
        net(cfg.model, host_backend(), DType::f32) {
    cfg.environment = std::move(env);
    net.init(11);
    GrpoTrainerOptions opts;
    opts.log = log;
    opts.progress = false;
    opts.on_saved = [this](const std::string&, int64_t step, const std::string&) { published.push_back(step); };
    const data::ChatFormat f = data::ChatFormat::nano3;
    trainer = std::make_unique<GrpoTrainer>(cfg, net, tok, load_rl_prompts(cfg.data.train_jsonl_fpath, tok, f),
                                            load_rl_prompts(cfg.data.validation_jsonl_fpath, tok, f), opts);
    trainer->restore();
  }
  ~FaultRun() { std::fclose(log); }
  std::string log_text() const {
    std::fflush(log);
    std::rewind(log);
    std::string s;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, log)) > 0;) s.append(buf, n);
    return s;
  }
  std::vector<float> weights() {
    std::vector<float> w;
    for (model::Param* p : net.params().all())
      for (double v : p->value.to_f64_vector()) w.push_back(static_cast<float>(v));
    return w;
  }
};

int count_lines(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

std::vector<nlohmann::json> metrics(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(GrpoEnvFaults, unscored_rows_are_logged_once_per_kind_counted_and_weigh_nothing) {
  const std::string data = write_data("grpo_env_fault_weigh");
  const fs::path ckpt = fs::temp_directory_path() / "grpo_env_fault_weigh_ckpt";
  fs::remove_all(ckpt);
  // Rollout ids 0-11 are the step's 12 rows (3 prompts x 4), 12-15 the validation's 4 rows.
  FaultGymServer server([](const GymRollout& r) {
    return r.id % 4 == 0 ? Fault::http_500 : r.id % 4 == 1 ? Fault::string_reward : Fault::none;
  });
  const std::vector<std::string> overrides = {"grpo.max_num_steps=1", "grpo.val_period=1", "grpo.max_val_samples=4",
                                              "grpo.val_at_start=false", "env.max_unscored_fraction=0.6"};
  std::vector<std::string> with_checkpoints = overrides;
  with_checkpoints.insert(with_checkpoints.end(),
                          {"checkpointing.enabled=true", "checkpointing.checkpoint_dir=" + ckpt.string()});
  FaultRun gym(data, with_checkpoints, gym_environment(server.url()));
  const GrpoRunResult res = gym.trainer->run();
  ASSERT_EQ(res.steps.size(), 1u);
  const GrpoStepRecord& r = res.steps[0];
  EXPECT_EQ(r.unscored_rows, 6);
  EXPECT_EQ(r.unscored_reasons, (nlohmann::json{{"HTTP 500", 3}, {"bad reward", 3}}));
  ASSERT_GT(r.reward_mean, 0.0) << "no scored row was rewarded: the comparison below would prove nothing";
  ASSERT_EQ(res.validations.size(), 1u);
  EXPECT_EQ(res.validations[0].unscored_rows, 2);

  // The reason, once per kind per step (3 rows of each kind), and the counts in the step line.
  const std::string log = gym.log_text();
  EXPECT_EQ(count_lines(log, "unscored (HTTP 500)"), 2) << log;  // the step and the validation
  EXPECT_EQ(count_lines(log, "  step 1: 3 of 12 rows unscored (HTTP 500): POST /verify: HTTP 500: Internal Server "
                             "Error"),
            1)
      << log;
  EXPECT_EQ(count_lines(log, "  step 1: 3 of 12 rows unscored (bad reward): POST /verify: \"reward\" is \"0.5\" "
                             "(string); expected a finite number"),
            1)
      << log;
  EXPECT_EQ(count_lines(log, "  validation at step 1: 1 of 4 rows unscored (HTTP 500)"), 1) << log;
  EXPECT_EQ(count_lines(log, "6 unscored (not trained)"), 1) << log;
  EXPECT_EQ(count_lines(log, "| 2 unscored (left out of accuracy and reward)"), 1) << log;

  // The counts in metrics.jsonl.
  bool train_seen = false, validation_seen = false;
  for (const nlohmann::json& m : metrics((ckpt / "metrics.jsonl").string())) {
    if (m["type"] == "train") {
      train_seen = true;
      EXPECT_EQ(m["unscored_rows"], 6);
      EXPECT_EQ(m["unscored_reasons"], (nlohmann::json{{"HTTP 500", 3}, {"bad reward", 3}}));
    } else if (m["type"] == "validation") {
      validation_seen = true;
      EXPECT_EQ(m["unscored_rows"], 2);
    }
  }
  EXPECT_TRUE(train_seen && validation_seen);

  // Zero weight: the same rows unscored in-process, with reward 1 or -5 instead of the server's
  // faults, give the same weights bit for bit; scored as a real 0 they train differently.
  const std::vector<float> w = gym.weights();
  for (const double junk : {1.0, -5.0}) {
    FaultRun scripted(data, overrides, std::make_shared<ScriptedEnvironment>(junk, false));
    const GrpoStepRecord s = scripted.trainer->train_step();
    EXPECT_EQ(s.unscored_rows, 6);
    EXPECT_EQ(s.loss, r.loss);
    EXPECT_TRUE(scripted.weights() == w) << "the unscored rows' reward " << junk << " changed the update";
  }
  FaultRun zeros(data, overrides, std::make_shared<ScriptedEnvironment>(0.0, true));
  EXPECT_EQ(zeros.trainer->train_step().unscored_rows, 0);
  EXPECT_FALSE(zeros.weights() == w) << "training the rows as reward 0 changed nothing: the test cannot tell";
  // Every row unscored (with the bound at 1): no token to train on, the weights stay as they were.
  FaultRun all(data, {"grpo.max_num_steps=1", "env.max_unscored_fraction=1"},
               std::make_shared<ScriptedEnvironment>(1.0, false, 4));
  const std::vector<float> before = all.weights();
  const GrpoStepRecord none = all.trainer->train_step();
  EXPECT_EQ(none.unscored_rows, 12);
  EXPECT_EQ(none.loss_tokens, 0);
  EXPECT_TRUE(all.weights() == before);
}

TEST(GrpoEnvFaults, past_the_bound_the_run_stops_keeping_its_last_checkpoint_and_publishing_nothing_more) {
  const std::string data = write_data("grpo_env_fault_bound");
  const fs::path ckpt = fs::temp_directory_path() / "grpo_env_fault_bound_ckpt";
  fs::remove_all(ckpt);
  // Step 1 (rollout ids 0-11) is scored; from step 2 the server answers 500 to everything.
  FaultGymServer server([](const GymRollout& r) { return r.id >= 12 ? Fault::http_500 : Fault::none; });
  FaultRun run(data,
          {"grpo.max_num_steps=3", "grpo.val_at_start=false", "checkpointing.enabled=true", "checkpointing.checkpoint_dir=" + ckpt.string(),
           "checkpointing.save_period=1", "checkpointing.keep_top_k=5"},
          gym_environment(server.url()));
  EXPECT_EQ(run.cfg.max_unscored_fraction, 0.05);  // the default
  std::string error;
  try {
    run.trainer->run();
  } catch (const InputError& e) {
    error = std::string("(an InputError) ") + e.what();
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(error,
            "step 2: the environment \"nemo_gym\" could not score 12 of 12 rows (100.0%), more than "
            "env.max_unscored_fraction 0.05 allows; first reason (HTTP 500): POST /verify: HTTP 500: Internal Server "
            "Error. Stopped before training on them: nothing of this step is trained, saved or published; the "
            "checkpoints in " + ckpt.string() + " are kept (rerun to resume from the last)");
  EXPECT_EQ(run.trainer->step(), 1);
  EXPECT_EQ(run.published, (std::vector<int64_t>{1}));
  EXPECT_TRUE(fs::exists(ckpt / "iter_0000001" / "model.safetensors"));
  EXPECT_FALSE(fs::exists(ckpt / "iter_0000002"));
  EXPECT_EQ(count_lines(run.log_text(), "  step 2: 12 of 12 rows unscored (HTTP 500)"), 1) << run.log_text();
  int train_records = 0, faults = 0;
  for (const nlohmann::json& m : metrics((ckpt / "metrics.jsonl").string())) {
    train_records += m["type"] == "train";
    if (m["type"] == "env_fault") {
      ++faults;
      EXPECT_EQ(m["step"], 2);
      EXPECT_EQ(m["unscored_rows"], 12);
      EXPECT_EQ(m["unscored_reasons"], (nlohmann::json{{"HTTP 500", 12}}));
    }
  }
  EXPECT_EQ(train_records, 1);
  EXPECT_EQ(faults, 1);
}

TEST(GrpoEnvFaults, a_validation_past_the_bound_stops_the_run_too) {
  const std::string data = write_data("grpo_env_fault_val");
  // Step 1 (rollout ids 0-11) is scored; its validation (ids 12-15) gets only malformed replies.
  FaultGymServer server([](const GymRollout& r) { return r.id >= 12 ? Fault::malformed_json : Fault::none; });
  FaultRun run(data, {"grpo.max_num_steps=2", "grpo.val_period=1", "grpo.max_val_samples=4", "grpo.val_at_start=false"},
               gym_environment(server.url()));
  std::string error;
  try {
    run.trainer->run();
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(error.rfind("validation at step 1: the environment \"nemo_gym\" could not score 4 of 4 rows (100.0%), more "
                        "than env.max_unscored_fraction 0.05 allows; first reason (malformed reply): POST /verify: the "
                        "reply is not JSON: ",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find("Stopped: nothing past the last checkpoint is saved or published"), std::string::npos) << error;
  EXPECT_EQ(count_lines(run.log_text(), "  validation at step 1: 4 of 4 rows unscored (malformed reply)"), 1);
}

TEST(GrpoEnvFaults, max_unscored_fraction_is_a_fraction_named_in_its_error) {
  const std::string data = write_data("grpo_env_fault_key");
  const int64_t vocab = data::Tokenizer::load(grpo_test::fixture_tokenizer_path()).vocab_size();
  auto error_of = [&](const std::string& value) -> std::string {
    try {
      grpo_test::tiny_grpo_config(vocab, data + "/train.jsonl", "", {"env.max_unscored_fraction=" + value}, "rl.yaml");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of("1.5"), "rl.yaml: env.max_unscored_fraction: expected a fraction in [0, 1] of a step's rows the "
                             "environment may leave unscored, got 1.5");
  EXPECT_NE(error_of("-0.1").find("env.max_unscored_fraction: expected a fraction in [0, 1]"), std::string::npos);
  EXPECT_NE(error_of("lots").find("env.max_unscored_fraction"), std::string::npos) << error_of("lots");
  EXPECT_EQ(error_of("0"), "");
  EXPECT_EQ(error_of("1"), "");
}

}  // namespace
}  // namespace nemotron::rl
