// The training loop: a run interrupted at a checkpoint and resumed in a fresh model repeats the
// uninterrupted run bit for bit (losses, grad norms, lrs, validation, final weights and MoE
// biases); gradient accumulation averages over every token of the global batch; each update
// uses lr(samples consumed before it); finetune loads weights only; the loss falls.
#include "train/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "model/hybrid_model.h"
#include "train_fixtures.h"

namespace nemotron::testing {
namespace {

namespace fs = std::filesystem;
using train::PretrainConfig;
using train::TrainResult;

struct TempDir {
  fs::path path = fs::temp_directory_path() / fmt::format("nemotron-trainer-{}-{}", ::getpid(), next());
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
  static int next() {
    static int c = 0;
    return c++;
  }
};

struct TrainRun {
  PretrainConfig cfg;
  model::HybridModel net;
  train::MockBatchSource train_src, valid_src;
  TrainRun(const PretrainConfig& c, uint64_t init_seed)
      : cfg(c),
        net(cfg.model, host_backend(), DType::f32),
        train_src(cfg.model.vocab_size, cfg.dataset.seq_length, cfg.train.micro_batch_size, cfg.dataset.random_seed, 0),
        valid_src(cfg.model.vocab_size, cfg.dataset.seq_length, cfg.train.micro_batch_size, cfg.dataset.random_seed,
                  1) {
    net.init(init_seed);
  }
  TrainResult go(bool resume = false, train::TrainerOptions opts = {nullptr, {}, {}, {}}) {
    train::Trainer t(cfg, net, train_src, &valid_src, opts);
    if (resume) t.restore_from_config();
    return t.run();
  }
};

std::vector<float> all_values(model::HybridModel& net) {
  std::vector<float> w;
  for (const model::Param* p : net.params().all()) {
    const float* d = p->value.data<float>();
    w.insert(w.end(), d, d + p->value.numel());
  }
  return w;
}

TEST(Trainer, resume_from_checkpoint_equals_uninterrupted_run_bit_for_bit) {
  TempDir tmp;
  const std::string save = (tmp.path / "ckpt").string();
  TrainRun full(tiny_train_config(), 1234);
  TrainResult a = full.go();
  ASSERT_EQ(a.steps.size(), 6u);
  ASSERT_EQ(a.evals.size(), 2u);  // at 3 and 6

  // Stops at iteration 3 (exit_interval) with a checkpoint, then a fresh process-like run (other
  // initial weights, new sources) resumes from it.
  TrainRun first(tiny_train_config({"checkpoint.save=" + save, "train.exit_interval=3"}), 1234);
  TrainResult b = first.go();
  ASSERT_TRUE(b.exited_early);
  ASSERT_EQ(b.steps.size(), 3u);
  TrainRun second(tiny_train_config({"checkpoint.save=" + save, "checkpoint.load=" + save}), 999);
  TrainResult c = second.go(/*resume=*/true);
  ASSERT_EQ(c.steps.size(), 3u);
  EXPECT_EQ(c.steps.front().iteration, 4);

  std::vector<train::StepRecord> joined = b.steps;
  joined.insert(joined.end(), c.steps.begin(), c.steps.end());
  for (size_t i = 0; i < 6; ++i) {
    SCOPED_TRACE(fmt::format("iteration {}", i + 1));
    EXPECT_EQ(joined[i].iteration, a.steps[i].iteration);
    EXPECT_EQ(joined[i].lm_loss, a.steps[i].lm_loss);  // exact: bit for bit
    EXPECT_EQ(joined[i].aux_loss, a.steps[i].aux_loss);
    EXPECT_EQ(joined[i].grad_norm, a.steps[i].grad_norm);
    EXPECT_EQ(joined[i].lr, a.steps[i].lr);
  }
  ASSERT_EQ(b.evals.size() + c.evals.size(), 2u);
  EXPECT_EQ(b.evals[0].lm_loss, a.evals[0].lm_loss);
  EXPECT_EQ(c.evals[0].lm_loss, a.evals[1].lm_loss);
  EXPECT_EQ(all_values(second.net), all_values(full.net));  // incl. the MoE correction biases
  EXPECT_GT(a.steps[0].aux_loss, 0.0);

  // The metrics file continues across the restart: one train record per iteration 1..6.
  std::ifstream f(fs::path(save) / "metrics.jsonl");
  std::vector<int64_t> iters;
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line);
    if (j["type"] == "train") {
      iters.push_back(j["iteration"]);
      EXPECT_EQ(j["lm_loss"].get<double>(), a.steps[iters.size() - 1].lm_loss);  // JSON keeps every bit
    }
  }
  EXPECT_EQ(iters, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

// A run killed between steps (the stop hook after iteration 3) whose last checkpoint is at 2:
// the resumed run redoes iteration 3 and goes on exactly as the uninterrupted run.
TEST(Trainer, a_run_killed_after_its_last_checkpoint_replays_the_lost_steps_exactly) {
  TempDir tmp;
  const std::string save = (tmp.path / "ckpt").string();
  TrainRun full(tiny_train_config(), 1234);
  TrainResult a = full.go();
  TrainRun killed(tiny_train_config({"checkpoint.save=" + save, "checkpoint.save_interval=2"}), 1234);
  TrainResult b = killed.go(false, {nullptr, {}, [](int64_t it) { return it == 3; }, {}});
  ASSERT_TRUE(b.exited_early);
  ASSERT_EQ(b.final_iteration, 3);
  TrainRun resumed(
      tiny_train_config({"checkpoint.save=" + save, "checkpoint.save_interval=2", "checkpoint.load=" + save}), 5);
  TrainResult c = resumed.go(true);
  ASSERT_EQ(c.steps.size(), 4u);  // 3, 4, 5, 6
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(c.steps[i].iteration, a.steps[i + 2].iteration);
    EXPECT_EQ(c.steps[i].lm_loss, a.steps[i + 2].lm_loss);
    EXPECT_EQ(c.steps[i].grad_norm, a.steps[i + 2].grad_norm);
  }
  EXPECT_EQ(all_values(resumed.net), all_values(full.net));
}

// A stop request (cli's SIGTERM handler) after iteration 2, with no save_interval: the run saves
// iteration 2 at that step boundary, says where to resume, and the resumed run ends exactly as
// the uninterrupted one.
TEST(Trainer, a_stop_request_saves_at_the_step_boundary_and_resumes_exactly) {
  TempDir tmp;
  const std::string save = (tmp.path / "ckpt").string();
  TrainRun full(tiny_train_config(), 1234);
  TrainResult a = full.go();
  TrainRun stopped(tiny_train_config({"checkpoint.save=" + save}), 1234);
  int64_t steps_seen = 0;
  auto stop = [&] { return ++steps_seen >= 2 ? std::string("received SIGTERM") : std::string(); };
  std::FILE* log = std::tmpfile();
  TrainResult b = stopped.go(false, {log, {}, {}, stop});
  ASSERT_TRUE(b.exited_early);
  EXPECT_EQ(b.stop_reason, "received SIGTERM");
  EXPECT_EQ(b.final_iteration, 2);
  EXPECT_EQ(b.last_checkpoint, save + "/iter_0000002");
  std::rewind(log);
  std::string text(1 << 16, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), log));
  std::fclose(log);
  EXPECT_NE(text.find("received SIGTERM: saved iteration 2 to " + save + "/iter_0000002; resume with checkpoint.load=" +
                      save + "\n"),
            std::string::npos)
      << text;
  TrainRun resumed(tiny_train_config({"checkpoint.save=" + save, "checkpoint.load=" + save}), 5);
  TrainResult c = resumed.go(true);
  ASSERT_EQ(c.steps.size(), 4u);
  EXPECT_EQ(c.steps.back().lm_loss, a.steps.back().lm_loss);
  EXPECT_EQ(all_values(resumed.net), all_values(full.net));
}

TEST(Trainer, each_update_uses_lr_of_samples_consumed_before_it_and_bias_moves) {
  TrainRun r(tiny_train_config(), 1);
  const std::vector<float> bias0(
      r.net.params().get("backbone.layers.3.mixer.gate.e_score_correction_bias").value.data<float>(),
      r.net.params().get("backbone.layers.3.mixer.gate.e_score_correction_bias").value.data<float>() + 4);
  TrainResult res = r.go();
  train::LrSchedule s = r.cfg.lr_schedule();
  for (const auto& st : res.steps) EXPECT_EQ(st.lr, s.lr((st.iteration - 1) * 4)) << st.iteration;
  EXPECT_EQ(res.steps[0].lr, 0.0);  // lr_warmup_init, as in Megatron's first iteration
  // Six updates of +-0.01 (or 0) per expert: every bias is a multiple of the rate, and some moved.
  const float* b = r.net.params().get("backbone.layers.3.mixer.gate.e_score_correction_bias").value.data<float>();
  double moved = 0;
  for (int e = 0; e < 4; ++e) {
    moved += std::fabs(b[e] - bias0[e]);
    EXPECT_NEAR(std::remainder(b[e], 0.01), 0.0, 1e-5);
    EXPECT_LE(std::fabs(b[e]), 0.06 + 1e-6);
  }
  EXPECT_GT(moved, 0.0);
}

// A source whose micro-batches mask very different numbers of tokens: averaging per micro-batch
// and averaging over the global batch's tokens then differ, so equality with the single big
// micro-batch proves the latter.
class MaskedSource : public train::BatchSource {
 public:
  MaskedSource(int64_t V, int64_t T, int64_t B) : inner_(V, T, B, 5, 0), T_(T), B_(B) {}
  model::Batch next() override {
    model::Batch b = inner_.next();
    std::vector<double> mask(static_cast<size_t>(B_ * T_), 0.0);
    for (int64_t r = 0; r < B_; ++r) {
      const int64_t row = inner_.next_sample() - B_ + r;  // global row index
      const int64_t keep = row % 2 == 0 ? T_ : 2;         // even rows all tokens, odd rows 2
      for (int64_t t = 0; t < keep; ++t) mask[r * T_ + t] = 1.0;
    }
    b.loss_mask = Tensor::from_vector<double>({B_, T_}, mask).to_host(DType::f32);
    return b;
  }
  nlohmann::json state() const override { return inner_.state(); }
  void restore(const nlohmann::json& s) override { inner_.restore(s); }
  std::string describe() const override { return "masked mock"; }

 private:
  train::MockBatchSource inner_;
  int64_t T_, B_;
};

TEST(Trainer, gradient_accumulation_averages_over_all_tokens_of_the_global_batch) {
  auto run = [](int64_t micro) {
    PretrainConfig c = tiny_train_config({"train.micro_batch_size=" + std::to_string(micro), "train.train_iters=3",
                                          "train.eval_interval=0", "scheduler.lr_warmup_iters=0",
                                          "scheduler.lr_wsd_decay_iters=", "scheduler.lr_decay_style=constant",
                                          "moe.moe_router_load_balancing_type=none", "moe.moe_aux_loss_coeff=0"});
    model::HybridModel net(c.model, host_backend(), DType::f32);
    net.init(3);
    // micro 1: four micro-batches of 16, 2, 16 and 2 loss tokens; micro 4: one of 36.
    MaskedSource src(c.model.vocab_size, c.dataset.seq_length, micro);
    train::Trainer t(c, net, src, nullptr, {nullptr, {}, {}, {}});
    return t.run();
  };
  TrainResult one = run(4), four = run(1);
  ASSERT_EQ(one.steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_NEAR(four.steps[i].lm_loss, one.steps[i].lm_loss, 2e-6 * one.steps[i].lm_loss);
    EXPECT_NEAR(four.steps[i].grad_norm, one.steps[i].grad_norm, 1e-4 * one.steps[i].grad_norm);
  }
}

TEST(Trainer, finetune_loads_weights_only_and_starts_at_iteration_zero) {
  TempDir tmp;
  const std::string save = (tmp.path / "ckpt").string();
  const std::vector<std::string> two = {"train.train_iters=2", "train.eval_interval=0",
                                        "scheduler.lr_wsd_decay_iters=1"};
  std::vector<std::string> o1 = two, o2 = two;
  o1.push_back("checkpoint.save=" + save);
  o2.insert(o2.end(), {"checkpoint.load=" + save, "checkpoint.finetune=true"});
  TrainRun pre(tiny_train_config(o1), 1);
  pre.go();
  TrainRun ft(tiny_train_config(o2), 77);
  train::Trainer t(ft.cfg, ft.net, ft.train_src, nullptr, {nullptr, {}, {}, {}});
  t.restore_from_config();
  EXPECT_EQ(all_values(ft.net), all_values(pre.net));
  EXPECT_EQ(t.iteration(), 0);
  EXPECT_EQ(t.optimizer().steps_taken(), 0);
  EXPECT_EQ(ft.train_src.next_sample(), 0);
  TrainResult r = t.run();
  EXPECT_EQ(r.steps.front().iteration, 1);
}

TEST(Trainer, loss_falls_on_the_mock_markov_chain) {
  TrainRun r(tiny_train_config({"train.train_iters=40", "train.eval_interval=0", "train.eval_iters=2",
                                "scheduler.lr_warmup_iters=4", "scheduler.lr_wsd_decay_iters=8", "optimizer.lr=1e-2"}),
             1);
  TrainResult res = r.go();
  ASSERT_EQ(res.evals.size(), 1u);  // the final validation
  EXPECT_NEAR(res.steps.front().lm_loss, std::log(64.0), 0.3);
  EXPECT_LT(res.evals.back().lm_loss, std::log(64.0) - 1.0);
}

}  // namespace
}  // namespace nemotron::testing
