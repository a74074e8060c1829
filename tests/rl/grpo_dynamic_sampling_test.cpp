// DAPO's dynamic sampling (rl/grpo_dynamic_sampling.h, grpo.use_dynamic_sampling): groups whose
// rewards are all equal are dropped, the batch is refilled from further generation rounds until
// num_prompts_per_step groups are kept (the surplus counted), the rounds are capped by
// grpo.dynamic_sampling_max_gen_batches (an error naming the key past it), and the trainer's step
// records NeMo RL's metrics of what it kept, checked against the environment's own record of
// every reward it gave.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "core/error.h"
#include "rl/grpo_dynamic_sampling.h"
#include "rl/grpo_test_env.h"
#include "rl/grpo_trainer.h"
#include "test_util.h"

namespace nemotron::rl {
namespace {

namespace fs = std::filesystem;

Rollout row(double reward, bool unscored = false, bool overlong = false) {
  Rollout r;
  r.prompt = {1, 2};
  if (!overlong) r.response = {3, 4};
  r.mask_sample = overlong;
  r.unscored = unscored;
  r.reward = reward;
  return r;
}

// A round of groups of 2, one reward pair per group.
RolloutBatch round_of(const std::vector<std::pair<double, double>>& groups, int64_t tokens) {
  RolloutBatch b;
  for (const auto& [x, y] : groups) b.rows.push_back(row(x)), b.rows.push_back(row(y));
  b.finished.assign(b.rows.size(), true);
  b.generated_tokens = tokens;
  b.scored_rows = static_cast<int64_t>(b.rows.size());
  return b;
}

std::vector<double> rewards_of(const RolloutBatch& b) {
  std::vector<double> r;
  for (const Rollout& x : b.rows) r.push_back(x.reward);
  return r;
}

TEST(DynamicSampling, a_group_is_kept_when_its_rewards_differ) {
  const std::vector<Rollout> rows{row(1), row(1), row(1),  // all right: dropped
                                  row(0), row(0), row(0),  // all wrong: dropped
                                  row(0), row(1), row(0),  // mixed: kept
                                  row(1), row(0, true), row(1),              // the differing row unscored: dropped
                                  row(1), row(0, false, true), row(1),       // an over-long prompt's row: no reward
                                  row(0.5), row(0.5), row(0.25)};            // shaped rewards differ: kept
  std::vector<double> rewards;
  for (const Rollout& r : rows) rewards.push_back(r.reward);
  EXPECT_EQ(groups_with_reward_spread(rows, rewards, 3), (std::vector<bool>{false, false, true, false, false, true}));
  // The rewards the advantages see decide (a shaping that levels a group drops it).
  rewards[7] = 0;
  EXPECT_FALSE(groups_with_reward_spread(rows, rewards, 3)[2]);
}

TEST(DynamicSampling, the_batch_is_refilled_cut_to_size_and_the_rounds_capped) {
  DynamicSamplingBuffer buf(/*target_rows=*/6, /*generations=*/2, /*max_gen_batches=*/3);
  EXPECT_TRUE(buf.may_generate());
  const RolloutBatch a = round_of({{1, 1}, {0, 1}, {0, 0}}, 10);  // one group kept
  buf.add(a, rewards_of(a));
  EXPECT_FALSE(buf.full());
  EXPECT_EQ(buf.kept_rows(), 2);
  const RolloutBatch b = round_of({{0, 0}, {1, 1}, {1, 1}}, 20);  // none kept
  buf.add(b, rewards_of(b));
  EXPECT_EQ(buf.kept_rows(), 2);
  EXPECT_TRUE(buf.may_generate());
  const RolloutBatch c = round_of({{1, 0}, {0, 0}, {0.5, 1}, {1, 0.25}}, 30);  // three kept: one too many
  buf.add(c, rewards_of(c));
  EXPECT_FALSE(buf.may_generate());  // 3 rounds: the cap
  ASSERT_TRUE(buf.full());
  EXPECT_EQ(buf.rounds(), 3);
  EXPECT_EQ(buf.discarded_valid_rows(), 2);
  EXPECT_EQ(buf.generated_rows(), 20);
  const RolloutBatch kept = buf.take();
  ASSERT_EQ(kept.rows.size(), 6u);
  ASSERT_EQ(kept.finished.size(), 6u);
  const std::vector<double> want{0, 1, 1, 0, 0.5, 1};  // in the order generated; {1, 0.25} cut off
  EXPECT_EQ(rewards_of(kept), want);
  EXPECT_EQ(kept.generated_tokens, 60);  // every round's work
  EXPECT_EQ(kept.scored_rows, 20);
  // Over every generated row: 10.75 reward in 20 rows; 10 rows right and finished.
  EXPECT_DOUBLE_EQ(buf.generated_reward_mean(), 10.75 / 20);
  EXPECT_DOUBLE_EQ(buf.generated_accuracy(), 10.0 / 20);
}

// Reward by prompt: questions with an even first number always 1 (a group dropped), the others
// the completion's byte parity (ParityEnvironment: most such groups mixed); or 0 for every row
// (`constant`). Records every reward in the order scored, which is the rows' order.
class RecordingEnvironment : public env::Environment {
 public:
  explicit RecordingEnvironment(bool constant) : constant_(constant) {}
  const char* name() const override { return "recording"; }
  std::vector<env::EnvResult> score(std::span<const env::EnvRow> rows) override {
    std::vector<env::EnvResult> out;
    for (const env::EnvRow& r : rows) {
      const int first = std::stoi(r.row->at("expected_answer").get<std::string>()) / 3;
      env::EnvResult e;
      e.reward = constant_ ? 0.0 : first % 2 == 0 ? 1.0 : (r.completion.size() % 2 == 0 ? 1.0 : 0.0);
      out.push_back(e);
      rewards.push_back(e.reward);
    }
    return out;
  }
  std::vector<double> rewards;

 private:
  bool constant_;
};

struct SampledRun {
  data::Tokenizer tok = data::Tokenizer::load(grpo_test::fixture_tokenizer_path());
  RlConfig cfg;
  model::HybridModel net;
  std::shared_ptr<RecordingEnvironment> env;
  std::unique_ptr<GrpoTrainer> trainer;
  SampledRun(const std::string& folder, bool constant, const std::vector<std::string>& overrides)
      : cfg(config(folder, overrides, tok.vocab_size())), net(cfg.model, host_backend(), DType::f32) {
    env = std::make_shared<RecordingEnvironment>(constant);
    cfg.environment = env;
    net.init(11);
    GrpoTrainerOptions opts;
    opts.log = nullptr;
    opts.progress = false;
    trainer = std::make_unique<GrpoTrainer>(
        cfg, net, tok, load_rl_prompts(cfg.data.train_jsonl_fpath, tok, data::ChatFormat::nano3), std::vector<RlPrompt>{},
        opts);
    trainer->restore();
  }
  static RlConfig config(const std::string& folder, const std::vector<std::string>& overrides, int64_t vocab) {
    std::string train;
    for (int i = 0; i < 40; ++i) train += grpo_test::question_row(i) + "\n";
    const std::string path = nemotron::testing::write_temp(folder, "train.jsonl", train);
    return grpo_test::tiny_grpo_config(vocab, path, "", overrides, "grpo_dynamic_sampling_test.yaml");
  }
};

TEST(DynamicSampling, the_trainer_keeps_the_groups_whose_rewards_differ_and_logs_nemo_rls_metrics) {
  // 3 prompts x 4 a step; rounds of 3 prompts; up to 10 rounds. Shuffle off: prompts in file order.
  SampledRun run("grpo_dynamic_sampling_trainer", false,
          {"grpo.use_dynamic_sampling=true", "grpo.max_num_steps=2", "data.shuffle=false"});
  int64_t seen = 0;
  for (int step = 1; step <= 2; ++step) {
    const GrpoStepRecord r = run.trainer->train_step();
    // Replay the filter on the environment's record of this step's rewards, round by round.
    const std::vector<double>& all = run.env->rewards;
    const int64_t G = 4, round_rows = 3 * G;
    int64_t rounds = 0, kept = 0;
    double kept_sum = 0, sum = 0;
    for (int64_t at = seen; at < static_cast<int64_t>(all.size()); at += round_rows, ++rounds) {
      for (int64_t k = at; k < at + round_rows; k += G) {
        const bool spread = !std::all_of(all.begin() + k, all.begin() + k + G, [&](double x) { return x == all[k]; });
        if (spread && kept < 3 * G) {
          kept += G;
          kept_sum = std::accumulate(all.begin() + k, all.begin() + k + G, kept_sum);
        }
      }
      sum = std::accumulate(all.begin() + at, all.begin() + at + round_rows, sum);
    }
    const int64_t generated = static_cast<int64_t>(all.size()) - seen;
    seen = static_cast<int64_t>(all.size());
    ASSERT_EQ(generated % round_rows, 0);
    EXPECT_EQ(r.dynamic_sampling_num_gen_batches, rounds) << "step " << step;
    EXPECT_GE(rounds, 2) << "the even questions' groups (all right) must force a refill";
    EXPECT_EQ(kept, 3 * G);
    EXPECT_DOUBLE_EQ(r.filtered_reward, kept_sum / static_cast<double>(kept));
    EXPECT_DOUBLE_EQ(r.reward_mean, sum / static_cast<double>(generated));
    EXPECT_GT(r.loss_tokens, 0);
    // The cursor moved by every round's prompts.
    EXPECT_EQ(run.trainer->cursor()["index"].get<int64_t>(), generated == 0 ? 0 : seen / G);
  }
}

TEST(DynamicSampling, past_the_rounds_cap_the_step_stops_naming_the_key) {
  SampledRun run("grpo_dynamic_sampling_cap", true,
          {"grpo.use_dynamic_sampling=true", "grpo.batch_multiplier=2", "grpo.dynamic_sampling_max_gen_batches=3"});
  try {
    run.trainer->train_step();
    ADD_FAILURE() << "a step of all-equal rewards trained";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grpo.dynamic_sampling_max_gen_batches: 3 generation round(s) of 6 prompts"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(run.env->rewards.size(), 3u * 6 * 4);  // exactly 3 rounds of 6 prompts x 4
}

TEST(DynamicSampling, off_the_same_environment_trains_every_group) {
  SampledRun run("grpo_dynamic_sampling_off", true, {});
  const GrpoStepRecord r = run.trainer->train_step();
  EXPECT_EQ(run.env->rewards.size(), 12u);
  EXPECT_EQ(r.dynamic_sampling_num_gen_batches, 0);
}

}  // namespace
}  // namespace nemotron::rl
