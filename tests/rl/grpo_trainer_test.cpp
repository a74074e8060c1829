// The GRPO loop (rl/grpo_trainer.h) on a tiny float32 model and the fixture tokenizer, with an
// environment whose reward is a fixed function of the completion text: the engine's log-probs
// equal the trainer's (fp32, CPU), a step raises the log-probability of the rewarded completions
// relative to the others, over-long prompts are masked and counted, and a run stopped halfway and
// resumed from its checkpoint ends with the same weights and step records, bit for bit, as one
// that never stopped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/config_tree.h"
#include "rl/grpo_advantages.h"
#include "rl/grpo_batch.h"
#include "rl/grpo_trainer.h"
#include "rl/rl_config.h"
#include "rl/rollout.h"
#include "rl/grpo_test_env.h"
#include "test_util.h"

namespace nemotron::rl {
namespace {

namespace fs = std::filesystem;

using grpo_test::fixture_tokenizer_path;

// A train and a val file of plain questions; returns the folder.
std::string write_data(const std::string& folder, int rows) {
  std::string train, val;
  for (int i = 0; i < rows; ++i) (i % 4 == 3 ? val : train) += grpo_test::question_row(i) + "\n";
  nemotron::testing::write_temp(folder, "train.jsonl", train);
  return fs::path(nemotron::testing::write_temp(folder, "val.jsonl", val)).parent_path().string();
}

// The shared tiny run (grpo_test_env.h); with `ckpt_dir`, checkpoints there every 2 steps.
RlConfig make_config(const std::string& data_dir, const std::string& ckpt_dir, int64_t vocab,
                     std::vector<std::string> overrides = {}) {
  if (!ckpt_dir.empty())
    overrides.insert(overrides.begin(), {"checkpointing.enabled=true", "checkpointing.checkpoint_dir=" + ckpt_dir,
                                         "checkpointing.save_period=2", "checkpointing.keep_top_k=5"});
  return grpo_test::tiny_grpo_config(vocab, data_dir + "/train.jsonl", data_dir + "/val.jsonl", overrides,
                                     "grpo_trainer_test.yaml");
}

struct Policy {  // a model, its config and its trainer
  data::Tokenizer tok = data::Tokenizer::load(fixture_tokenizer_path());
  RlConfig cfg;
  model::HybridModel net;
  std::unique_ptr<GrpoTrainer> trainer;
  Policy(const std::string& data_dir, const std::string& ckpt_dir, const std::vector<std::string>& overrides = {},
      GrpoTrainerOptions opts = {})
      : cfg(make_config(data_dir, ckpt_dir, tok.vocab_size(), overrides)), net(cfg.model, host_backend(), DType::f32) {
    net.init(11);
    const data::ChatFormat f = data::ChatFormat::nano3;
    opts.log = nullptr;
    opts.progress = false;
    trainer = std::make_unique<GrpoTrainer>(cfg, net, tok, load_rl_prompts(cfg.data.train_jsonl_fpath, tok, f),
                                            load_rl_prompts(cfg.data.validation_jsonl_fpath, tok, f), opts);
    trainer->restore();
  }
};

std::vector<float> weights(model::HybridModel& net) {
  std::vector<float> w;
  for (model::Param* p : net.params().all()) {
    const std::vector<double> v = p->value.to_f64_vector();
    w.insert(w.end(), v.begin(), v.end());
  }
  return w;
}

TEST(GrpoTrainer, engine_and_trainer_logprobs_agree_in_fp32) {
  const std::string data = write_data("grpo_trainer_mismatch", 24);
  fs::remove_all(fs::temp_directory_path() / "grpo_trainer_mismatch_ckpt");
  Policy run(data, (fs::temp_directory_path() / "grpo_trainer_mismatch_ckpt").string());
  const GrpoStepRecord r = run.trainer->train_step();
  EXPECT_GT(r.generated_tokens, 0);
  EXPECT_GT(r.loss_tokens, 0);
  // NeMo RL's token_mult_prob_error: mean exp|gen_lp - train_lp|, 1 when they agree.
  EXPECT_LT(std::fabs(r.token_mult_prob_error - 1.0), 1e-4);
  EXPECT_LT(r.max_logprob_error, 1e-4);
  EXPECT_EQ(r.refit_seconds, 0.0);
  EXPECT_GT(r.grad_norm, 0.0);
  // The weights the engine reads: every parameter's float32 values, counted once for the run.
  int64_t floats = 0;
  for (const model::Param* p : run.net.params().all()) floats += p->value.numel();
  EXPECT_EQ(r.weight_bytes, 4 * floats);
  EXPECT_EQ(run.trainer->train_step().weight_bytes, r.weight_bytes);
}

TEST(GrpoTrainer, a_step_raises_the_logprob_of_rewarded_completions) {
  const std::string data = write_data("grpo_trainer_direction", 24);
  Policy run(data, "");
  const RlConfig& cfg = run.cfg;
  std::vector<RlPrompt> prompts = load_rl_prompts(cfg.data.train_jsonl_fpath, run.tok, data::ChatFormat::nano3);
  std::vector<const RlPrompt*> batch{&prompts[0], &prompts[1], &prompts[2]};
  RolloutOptions ro;
  ro.generations = 4;
  ro.sampling.max_new_tokens = 12;
  ro.sampling.seed = 3;
  const RolloutBatch rb = collect_rollouts(run.net, run.tok, *cfg.environment, batch, ro);
  std::vector<double> rewards;
  std::vector<std::vector<int32_t>> groups;
  for (const Rollout& x : rb.rows) rewards.push_back(x.reward), groups.push_back(x.prompt);
  const std::vector<double> adv = grpo_advantages(rewards, group_by_prompt(groups), true, true);
  double spread = 0;
  for (double a : adv) spread += std::fabs(a);
  ASSERT_GT(spread, 0.0) << "every group got equal rewards: nothing to learn from";
  GrpoBatchOptions bo;
  bo.micro_batch_size = 4;
  bo.max_total_sequence_length = 128;
  std::vector<GrpoMicroBatch> micro = build_grpo_micro_batches(rb.rows, adv, bo);
  Context ctx{&host_backend(), nullptr, DType::f32};
  fill_policy_logprobs(ctx, run.net, micro, false);
  // The surrogate sum_t A_t * logp_t over the trained tokens, before and after one update.
  auto surrogate = [&] {
    std::vector<GrpoMicroBatch> m = micro;
    fill_policy_logprobs(ctx, run.net, m, false);
    double s = 0;
    for (const GrpoMicroBatch& mb : m) {
      const std::vector<double> mask = grpo_token_mask(mb.batch);
      for (size_t n = 0; n < mask.size(); ++n) s += mask[n] * mb.data.advantages[n] * mb.data.prev_logprobs[n];
    }
    return s;
  };
  const double before = surrogate();
  ClippedPGLoss loss(cfg.grpo.loss_fn);
  loss.set_data(loss_data_of(micro));
  train::AdamW opt(run.net.params(), {0.9, 0.999, 1e-8, 0.0});
  train::TrainStep step(run.net, opt, train::StepConfig{1.0, {}});
  step.run(batches_of(micro), loss, 1e-3, 1);
  const double after = surrogate();
  EXPECT_GT(after, before);
}

TEST(GrpoTrainer, overlong_prompts_are_masked_and_counted) {
  const std::string data = write_data("grpo_trainer_overlong", 24);
  // The rendered prompts are ~40 tokens: a 30-token limit leaves no room for any response.
  Policy run(data, "", {"policy.max_total_sequence_length=30"});
  const GrpoStepRecord r = run.trainer->train_step();
  EXPECT_EQ(r.overlong_prompts, 3);
  EXPECT_EQ(r.generated_tokens, 0);
  EXPECT_EQ(r.loss_tokens, 0);
  EXPECT_EQ(r.masked_rows, 12);
}

TEST(GrpoTrainer, stopped_and_resumed_run_matches_an_uninterrupted_one_bit_for_bit) {
  const std::string data = write_data("grpo_trainer_resume", 10);  // 8 train prompts: steps cross epochs
  const fs::path tmp = fs::temp_directory_path();
  fs::remove_all(tmp / "grpo_resume_a");
  fs::remove_all(tmp / "grpo_resume_b");
  Policy a(data, (tmp / "grpo_resume_a").string());
  const GrpoRunResult ra = a.trainer->run();
  ASSERT_EQ(ra.steps.size(), 4u);

  GrpoTrainerOptions stop;
  stop.stop_after = [](int64_t step) { return step == 2; };
  GrpoRunResult rb1;
  {
    Policy b(data, (tmp / "grpo_resume_b").string(), {}, stop);
    rb1 = b.trainer->run();
  }
  ASSERT_EQ(rb1.steps.size(), 2u);
  Policy c(data, (tmp / "grpo_resume_b").string());
  EXPECT_EQ(c.trainer->step(), 2);
  EXPECT_FALSE(c.trainer->resumed_from().empty());
  const GrpoRunResult rb2 = c.trainer->run();
  ASSERT_EQ(rb2.steps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const GrpoStepRecord &x = ra.steps[2 + i], &y = rb2.steps[i];
    EXPECT_EQ(x.step, y.step);
    EXPECT_EQ(x.reward_mean, y.reward_mean);
    EXPECT_EQ(x.loss, y.loss);
    EXPECT_EQ(x.grad_norm, y.grad_norm);
    EXPECT_EQ(x.generated_tokens, y.generated_tokens);
  }
  EXPECT_EQ(a.trainer->cursor(), c.trainer->cursor());
  const std::vector<float> wa = weights(a.net), wc = weights(c.net);
  ASSERT_EQ(wa.size(), wc.size());
  EXPECT_TRUE(wa == wc) << "final weights differ";
  // Something was learned at all (the comparison is not between two untouched models).
  Policy fresh(data, "");
  EXPECT_FALSE(weights(fresh.net) == wa);
}

// policy.generation.prefix_sharing: the G generations of a prompt prefill it once, and the run is
// the same as one where each prefills its own: the same tokens, rewards, losses, gradients and
// weights bit for bit (the loss takes the trainer's log-probs), while the metrics made from the
// engine's log-probs agree to float rounding only: without sharing the G copies are G rows of one
// packed prefill, and OpenBLAS may round a row by its position in the batch (on an AMD EPYC with
// its Zen kernels the float32 engine's metrics moved by 3e-9 relative; tests/engine/prefix_sharing_test.cpp).
TEST(GrpoTrainer, prefix_sharing_on_and_off_give_the_same_run) {
  const std::string data = write_data("grpo_trainer_prefix_sharing", 10);
  Policy on(data, "", {"grpo.max_num_steps=2"}), off(data, "", {"grpo.max_num_steps=2", "policy.generation.prefix_sharing=false"});
  const GrpoRunResult a = on.trainer->run(), b = off.trainer->run();
  ASSERT_EQ(a.steps.size(), 2u);
  ASSERT_EQ(b.steps.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const GrpoStepRecord &x = a.steps[i], &y = b.steps[i];
    EXPECT_EQ(x.reward_mean, y.reward_mean) << "step " << i;
    EXPECT_EQ(x.loss, y.loss) << "step " << i;
    EXPECT_EQ(x.grad_norm, y.grad_norm) << "step " << i;
    EXPECT_NEAR(x.token_mult_prob_error, y.token_mult_prob_error, 1e-6) << "step " << i;
    EXPECT_EQ(x.generated_tokens, y.generated_tokens) << "step " << i;
    ASSERT_EQ(x.loss_metrics.size(), y.loss_metrics.size()) << "step " << i;
    for (const auto& [key, value] : x.loss_metrics) {
      ASSERT_TRUE(y.loss_metrics.contains(key)) << key;
      EXPECT_NEAR(value, y.loss_metrics.at(key), 1e-6 * std::max(1.0, std::fabs(value))) << key << " step " << i;
    }
    EXPECT_EQ(y.shared_prefill_tokens, 0) << "step " << i;
    EXPECT_GT(x.shared_prefill_tokens, 0) << "step " << i;
    EXPECT_EQ(x.prefill_tokens + x.shared_prefill_tokens, y.prefill_tokens) << "step " << i;
  }
  EXPECT_TRUE(weights(on.net) == weights(off.net)) << "final weights differ";
}

TEST(GrpoTrainer, resume_refuses_a_cursor_of_another_data_set) {
  const std::string data = write_data("grpo_trainer_cursor", 10);
  const fs::path dir = fs::temp_directory_path() / "grpo_cursor_ckpt";
  fs::remove_all(dir);
  {
    Policy a(data, dir.string(), {"grpo.max_num_steps=1"});
    a.trainer->run();
  }
  const std::string err = nemotron::testing::input_error([&] { Policy b(data, dir.string(), {"grpo.seed=8"}); });
  EXPECT_NE(err.find("data.train"), std::string::npos) << err;
  EXPECT_NE(err.find("seed 7"), std::string::npos) << err;
}

TEST(GrpoTrainer, device_and_mixed_precision_are_the_other_stages_keys) {
  const std::string data = write_data("grpo_trainer_device", 8);
  const int64_t V = data::Tokenizer::load(fixture_tokenizer_path()).vocab_size();
  const RlConfig cpu = make_config(data, "", V);
  EXPECT_EQ(cpu.device, "cpu");
  EXPECT_EQ(cpu.mixed_precision, "fp32");
  const RlConfig gpu = make_config(data, "", V, {"device=cuda"});  // read in any build; opened by the command
  EXPECT_EQ(gpu.device, "cuda");
  EXPECT_EQ(gpu.mixed_precision, "bf16_mixed");
  EXPECT_EQ(make_config(data, "", V, {"device=cuda:1", "mixed_precision=fp32"}).mixed_precision, "fp32");
  EXPECT_EQ(nemotron::testing::input_error([&] { make_config(data, "", V, {"device=gpu"}); }),
            "grpo_trainer_test.yaml: device: expected cpu, cuda or cuda:N, got \"gpu\"");
  EXPECT_EQ(nemotron::testing::input_error([&] { make_config(data, "", V, {"mixed_precision=bf16_mixed"}); }),
            "grpo_trainer_test.yaml: mixed_precision: bf16_mixed needs device: cuda (the CPU trains in fp32)");
  const std::string plan = rl_dry_run_text(gpu, "grpo_trainer_test.yaml", 1);
  EXPECT_NE(plan.find("engine memory (bf16)"), std::string::npos) << plan;
  EXPECT_NE(plan.find("training memory on cuda (bf16 weights, fp32 masters"), std::string::npos) << plan;
}

// NeMo RL's remaining options through a real step (reinforce++ with the KL in its reward, icepop,
// the positive-example NLL, advantage clipping): the step trains, and metrics.jsonl records every
// loss metric under NeMo RL's name.
TEST(GrpoTrainer, nemo_rl_loss_options_train_and_record_their_metrics) {
  const std::string data = write_data("grpo_trainer_options", 24);
  const fs::path ckpt = fs::temp_directory_path() / "grpo_trainer_options_ckpt";
  fs::remove_all(ckpt);
  Policy run(data, ckpt.string(),
             {"grpo.max_num_steps=1", "grpo.adv_estimator.name=reinforce_plus_plus", "grpo.advantage_clip_high=1.5",
              "loss_fn.use_kl_in_reward=true", "loss_fn.reference_policy_kl_penalty=0.05",
              "loss_fn.use_importance_sampling_correction=true", "loss_fn.truncated_importance_sampling_type=icepop",
              "loss_fn.truncated_importance_sampling_ratio=5", "loss_fn.truncated_importance_sampling_ratio_min=0.2",
              "loss_fn.positive_example_nll_weight=0.1"});
  const GrpoRunResult res = run.trainer->run();
  ASSERT_EQ(res.steps.size(), 1u);
  const GrpoStepRecord& r = res.steps[0];
  EXPECT_GT(r.loss_tokens, 0);
  EXPECT_GT(r.grad_norm, 0.0);
  EXPECT_TRUE(std::isfinite(r.loss));
  EXPECT_EQ(r.kl, 0.0);  // the KL went into the reward
  // The reference policy only runs forwards: it holds no gradients (a whole float32 copy would
  // cost twice its bf16 weights on a GPU).
  ASSERT_NE(run.trainer->reference_params(), nullptr);
  for (const model::Param* p : run.trainer->reference_params()->all())
    EXPECT_FALSE(p->grad.defined()) << p->name;
  // The engine's and the trainer's log-probs agree (fp32): every weight is kept by icepop.
  EXPECT_EQ(r.loss_metrics.at("is_oob_ratio"), 0.0);
  EXPECT_LE(r.loss_metrics.at("probs_ratio_min"), r.loss_metrics.at("probs_ratio_max"));
  EXPECT_NEAR(r.loss_metrics.at("probs_ratio_min"), 1.0, 1e-4);  // one update: on-policy
  std::ifstream in(ckpt / "metrics.jsonl");
  std::string line, train_line;
  while (std::getline(in, line))
    if (line.find("\"type\":\"train\"") != std::string::npos) train_line = line;
  ASSERT_FALSE(train_line.empty());
  const nlohmann::json rec = nlohmann::json::parse(train_line);
  for (const char* k : {"probs_ratio", "probs_ratio_clamped", "probs_ratio_min", "probs_ratio_max",
                        "probs_ratio_clamped_min", "probs_ratio_clamped_max", "js_divergence_error", "is_oob_ratio",
                        "positive_nll_loss", "gen_kl_error", "policy_kl_error", "sampling_importance_ratio",
                        "approx_entropy", "num_valid_samples", "kl_penalty"})
    EXPECT_TRUE(rec.contains(k)) << k << " missing from " << train_line;
  EXPECT_GT(rec.at("positive_nll_loss").get<double>(), 0.0) << "no row had reward > 0?";
}

// Two optimizer updates per step: both use the log-probs of the policy before the step's first
// update (NeMo RL's prev_logprobs, computed once before training), so the second sees ratios != 1.
TEST(GrpoTrainer, later_updates_of_a_step_see_the_ratio_to_the_steps_first_policy) {
  const std::string data = write_data("grpo_trainer_updates", 24);
  Policy run(data, "", {"policy.train_global_batch_size=6", "policy.train_micro_batch_size=2"});
  const GrpoStepRecord r = run.trainer->train_step();
  ASSERT_GT(r.grad_norm, 0.0);
  const double lo = r.loss_metrics.at("probs_ratio_min"), hi = r.loss_metrics.at("probs_ratio_max");
  EXPECT_GT(hi - lo, 1e-4) << "the second update saw the ratio 1: its old log-probs were recomputed after the first";
  EXPECT_LE(lo, 1.0 + 1e-6);
  EXPECT_GE(hi, 1.0 - 1e-6);
}

}  // namespace
}  // namespace nemotron::rl
