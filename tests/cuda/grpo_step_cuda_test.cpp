// One GRPO step (rl/grpo_trainer.h: rollouts through the engine, rewards, advantages, the trainer's
// and the reference policy's log-probs, ClippedPGLoss through the shared training step, AdamW) on
// a tiny float32 model on CUDA against the same step on the CPU from the same weights and prompts
// (test_cuda; skipped without a GPU). Float32 on both sides, so every difference is rounding:
//  - the rollouts: the same tokens (every draw is the token where the cumulative probability first
//    exceeds a uniform from a counter-based stream keyed by request id, the same uniform on both
//    devices, on the GPU by ops::sample_rows where the logits are; GPU and CPU logits and sums
//    differ by ~1e-6, which moves a draw only if its uniform falls that close to a boundary of
//    the cumulative distribution: odds of order 1e-4 over these ~150 draws, and then
//    deterministically so on a given GPU), engine log-probs within 1e-3 (the bound
//    generation_cuda_cases.cpp uses for the same engine, GPU against CPU);
//  - the step record: tokens, rewards, masks equal; the loss within 1e-4 absolute (at the first
//    step the ratio is 1 and the loss is -mean(w * A) over trained tokens with w = exp(prev_lp -
//    gen_lp), so it moves by |A| (<= ~2) times the log-prob gaps (< 1e-5 here)); the gradient
//    norm and every gradient within 1e-3 relative (float32 reductions in another order over a
//    model this size differ by ~1e-6..1e-5 relative; a wrong mask, advantage, sign or a missed
//    micro-batch is a difference of order 1);
//  - the engine's log-probs against the trainer's on the GPU (max |dlogp|, the step's own
//    mismatch metric): below 1e-3, as on the CPU in float32 (grpo_trainer_test.cpp);
//  - the weights after the AdamW update, element by element: AdamW's first step is
//    lr * g / (|g| + eps), +-lr for almost every element whatever its gradient's size, so the
//    updates agree to ~1e-6 lr except where the gradient is at float32's rounding level (its sign
//    then noise: up to 2 lr apart). An update more than 1e-3 lr apart is allowed only for such a
//    gradient (|g| <= 1e-4 of the largest) and for at most 0.1% of the elements; a real fault
//    changes the updates of whole tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "core/config_tree.h"
#include "rl/grpo_trainer.h"
#include "rl/rl_config.h"
#include "rl/rollout.h"
#include "rl/grpo_test_env.h"
#include "test_util.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace nemotron::rl {
namespace {

#if NEMOTRON_CUDA
namespace fs = std::filesystem;

using grpo_test::fixture_tokenizer_path;

// The shared tiny run (grpo_test_env.h) for one step on the GPU in float32, with the KL penalty on
// so the reference policy's log-probs run on the GPU too.
RlConfig make_config(const std::string& train_jsonl, int64_t vocab) {
  return grpo_test::tiny_grpo_config(
      vocab, train_jsonl, "",
      {"grpo.max_num_steps=1", "loss_fn.reference_policy_kl_penalty=0.05", "device=cuda", "mixed_precision=fp32"},
      "grpo_step_cuda_test.yaml");
}

std::string write_prompts(int rows) {
  std::string text;
  for (int i = 0; i < rows; ++i) text += grpo_test::question_row(i) + "\n";
  return nemotron::testing::write_temp("grpo_step_cuda", "train.jsonl", text);
}

std::vector<std::vector<double>> values(model::HybridModel& net, bool grads) {
  std::vector<std::vector<double>> out;
  for (const model::Param* p : net.params().all())
    out.push_back(grads ? (p->grad.defined() ? p->grad.to_f64_vector() : std::vector<double>()) : p->value.to_f64_vector());
  return out;
}

double norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// ||a - b|| / ||b|| over every parameter together.
double relative_gap(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < a[i].size(); ++k) d += (a[i][k] - b[i][k]) * (a[i][k] - b[i][k]), n += b[i][k] * b[i][k];
  return std::sqrt(d) / std::max(std::sqrt(n), 1e-300);
}

TEST(GrpoCuda, a_float32_step_on_the_gpu_matches_the_cpu) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  const data::Tokenizer tok = data::Tokenizer::load(fixture_tokenizer_path());
  const RlConfig cfg = make_config(write_prompts(6), tok.vocab_size());
  ASSERT_EQ(cfg.device, "cuda");
  ASSERT_EQ(cfg.mixed_precision, "fp32");
  model::HybridModel cpu_net(cfg.model, host_backend(), DType::f32), gpu_net(cfg.model, gpu, DType::f32);
  cpu_net.init(11);
  for (size_t i = 0; i < cpu_net.params().all().size(); ++i)  // the same weights, by construction
    gpu_net.params().all()[i]->value.copy_from(cpu_net.params().all()[i]->value);
  const std::vector<RlPrompt> prompts = load_rl_prompts(cfg.data.train_jsonl_fpath, tok, data::ChatFormat::nano3);

  // The rollouts alone, with the step's sampling options (the same streams on both devices).
  RolloutOptions ro;
  ro.generations = 4;
  ro.sampling.temperature = 1.0;
  ro.sampling.max_new_tokens = 12;
  ro.sampling.seed = 7;
  ro.max_total_sequence_length = 128;
  ro.first_request_id = uint64_t{1} << 32;
  const std::vector<const RlPrompt*> batch{&prompts[0], &prompts[1], &prompts[2]};
  const RolloutBatch cr = collect_rollouts(cpu_net, tok, *cfg.environment, batch, ro);
  const RolloutBatch gr = collect_rollouts(gpu_net, tok, *cfg.environment, batch, ro);
  ASSERT_EQ(cr.rows.size(), gr.rows.size());
  size_t tokens = 0;
  for (size_t i = 0; i < cr.rows.size(); ++i) {
    ASSERT_EQ(cr.rows[i].response, gr.rows[i].response) << "rollout " << i << ": the GPU generated other tokens";
    for (size_t t = 0; t < cr.rows[i].response.size(); ++t)
      EXPECT_NEAR(cr.rows[i].generation_logprobs[t], gr.rows[i].generation_logprobs[t], 1e-3)
          << "rollout " << i << " token " << t;
    EXPECT_EQ(cr.rows[i].reward, gr.rows[i].reward) << "rollout " << i;
    tokens += cr.rows[i].response.size();
  }
  ASSERT_GT(tokens, 50u);

  // One whole GRPO step on each.
  GrpoTrainerOptions opts;
  opts.log = nullptr;
  opts.progress = false;
  GrpoTrainer cpu_trainer(cfg, cpu_net, tok, prompts, {}, opts), gpu_trainer(cfg, gpu_net, tok, prompts, {}, opts);
  cpu_trainer.restore();
  gpu_trainer.restore();
  const std::vector<std::vector<double>> before = values(cpu_net, false);
  const GrpoStepRecord c = cpu_trainer.train_step();
  const GrpoStepRecord g = gpu_trainer.train_step();

  EXPECT_EQ(c.generated_tokens, g.generated_tokens);
  EXPECT_EQ(c.loss_tokens, g.loss_tokens);
  EXPECT_EQ(c.masked_rows, g.masked_rows);
  EXPECT_EQ(c.reward_mean, g.reward_mean);
  ASSERT_GT(c.loss_tokens, 0);
  ASSERT_GT(c.grad_norm, 0.0);
  EXPECT_NEAR(g.loss, c.loss, 1e-4);
  EXPECT_LT(std::fabs(g.grad_norm - c.grad_norm) / c.grad_norm, 1e-3) << "grad norm " << g.grad_norm << " vs " << c.grad_norm;
  EXPECT_LT(g.max_logprob_error, 1e-3) << "the GPU engine's log-probs against the GPU trainer's";
  EXPECT_NEAR(g.kl, c.kl, 1e-6);

  const std::vector<std::vector<double>> cg = values(cpu_net, true), gg = values(gpu_net, true);
  const double grad_gap = relative_gap(gg, cg);
  EXPECT_LT(grad_gap, 1e-3) << "gradients, GPU against CPU";
  std::vector<double> total;
  for (const auto& v : cg) total.insert(total.end(), v.begin(), v.end());
  const double gnorm = norm(total);
  for (size_t i = 0; i < cg.size(); ++i) {  // per tensor, where its gradient is not negligible
    const model::Param& p = *cpu_net.params().all()[i];
    const double n = norm(cg[i]);
    if (n < 1e-3 * gnorm) continue;
    std::vector<std::vector<double>> a{gg[i]}, b{cg[i]};
    EXPECT_LT(relative_gap(a, b), 1e-3) << p.name << ": gradient, GPU against CPU";
  }

  const std::vector<std::vector<double>> cw = values(cpu_net, false), gw = values(gpu_net, false);
  std::vector<std::vector<double>> cu = cw, gu = gw;  // the updates
  for (size_t i = 0; i < cw.size(); ++i)
    for (size_t k = 0; k < cw[i].size(); ++k) cu[i][k] -= before[i][k], gu[i][k] -= before[i][k];
  const double update_gap = relative_gap(gu, cu);
  // Element by element: AdamW's first update is lr * g / (|g| + eps), so the two devices' updates
  // agree to ~1e-6 lr wherever the gradient is above float32's rounding level of its sums, and may
  // differ only where it is not (|g| <= 1e-4 of the largest gradient element: there its sign and
  // size are noise); those elements must be rare.
  double gmax = 0;
  for (const auto& v : cg)
    for (double x : v) gmax = std::max(gmax, std::fabs(x));
  int64_t elements = 0, differing = 0, reported = 0;
  for (size_t i = 0; i < cu.size(); ++i)
    for (size_t k = 0; k < cu[i].size(); ++k, ++elements) {
      const double du = std::fabs(gu[i][k] - cu[i][k]);
      if (du <= 1e-3 * c.lr) continue;
      ++differing;
      const double grad = cg[i].empty() ? 0.0 : cg[i][k];
      if (std::fabs(grad) > 1e-4 * gmax && reported++ < 10)
        ADD_FAILURE() << cpu_net.params().all()[i]->name << "[" << k << "]: update " << gu[i][k] << " on the GPU, "
                      << cu[i][k] << " on the CPU, for a gradient of " << grad << " (largest " << gmax << ")";
    }
  EXPECT_LE(differing, elements / 1000) << "of " << elements << " updated elements, " << differing << " differ";
  std::vector<double> cpu_update;
  for (const auto& v : cu) cpu_update.insert(cpu_update.end(), v.begin(), v.end());
  EXPECT_GT(norm(cpu_update), 0.0) << "the step changed nothing";

  EXPECT_EQ(g.refit_seconds, 0.0);
  EXPECT_GT(g.weight_bytes, 0);
  EXPECT_EQ(g.weight_bytes, c.weight_bytes);
  EXPECT_GE(g.device_bytes_in_use, g.weight_bytes) << "the allocator holds at least the weights";
  EXPECT_GE(g.device_peak_bytes, g.device_bytes_in_use);
  std::printf(
      "GRPO step, CUDA float32 against the CPU: %zu rollout tokens equal; loss %.9g vs %.9g, grad norm %.9g vs %.9g "
      "(relative %.2e), gradients relative %.2e, AdamW update relative %.2e (%lld of %lld elements differ by more than "
      "1e-3 lr), GPU engine/trainer max |dlogp| %.2e; "
      "GPU memory %.4f MiB in use, weights %.4f MiB\n",
      tokens, g.loss, c.loss, g.grad_norm, c.grad_norm, std::fabs(g.grad_norm - c.grad_norm) / c.grad_norm, grad_gap,
      update_gap, static_cast<long long>(differing), static_cast<long long>(elements), g.max_logprob_error,
      static_cast<double>(g.device_bytes_in_use) / (1 << 20), static_cast<double>(g.weight_bytes) / (1 << 20));
}
#endif

}  // namespace
}  // namespace nemotron::rl
