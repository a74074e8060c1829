// ClippedPGLoss through the shared training step on a tiny float64 HybridModel: rollouts ->
// micro-batches -> old / reference log-probs from the model -> TrainStep::run. The parameter
// gradients it leaves equal central finite differences of the step's loss; on-policy (old =
// current log-probs, KL off) the loss is -mean(advantage) over the valid tokens and the ratio 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "rl/grpo_advantages.h"
#include "rl/grpo_batch.h"
#include "train/train_fixtures.h"
#include "train/train_step.h"

namespace nemotron::rl {
namespace {

model::ModelConfig tiny_model() {
  // No MoE: top-k routing is piecewise constant and would make finite differences meaningless.
  return testing::tiny_train_config({"model.hybrid_override_pattern=M*-"}).model;
}

std::vector<Rollout> rollouts(const model::ModelConfig& cfg, int64_t P, int64_t G, uint64_t seed) {
  Philox rng(seed);
  std::vector<Rollout> rows;
  uint64_t k = 0;
  for (int64_t p = 0; p < P; ++p) {
    std::vector<int32_t> prompt;
    for (int64_t i = 0; i < 3 + p; ++i) prompt.push_back(static_cast<int32_t>(rng.bits(k++) % cfg.vocab_size));
    for (int64_t g = 0; g < G; ++g) {
      Rollout r;
      r.prompt = prompt;
      const int64_t len = 2 + static_cast<int64_t>(rng.bits(k++) % 6);
      for (int64_t i = 0; i < len; ++i) {
        r.response.push_back(static_cast<int32_t>(rng.bits(k++) % cfg.vocab_size));
        r.generation_logprobs.push_back(0);  // filled from the model below
      }
      r.reward = static_cast<double>(rng.bits(k++) % 3) / 2;
      rows.push_back(r);
    }
  }
  return rows;
}

std::vector<int64_t> groups(const std::vector<Rollout>& rows) {
  std::vector<std::vector<int32_t>> prompts;
  for (const Rollout& r : rows) prompts.push_back(r.prompt);
  return group_by_prompt(prompts);
}

struct Rollouts {
  std::vector<GrpoMicroBatch> micro;
  int64_t tokens = 0;
};

Rollouts prepare(model::HybridModel& net, const model::ModelConfig& cfg, int64_t max_len) {
  std::vector<Rollout> rows = rollouts(cfg, 3, 4, 11);
  std::vector<double> rewards;
  for (const Rollout& r : rows) rewards.push_back(r.reward);
  const std::vector<double> adv = grpo_advantages(rewards, groups(rows), true, true);
  GrpoBatchOptions opt;
  opt.micro_batch_size = 5, opt.max_total_sequence_length = max_len, opt.mask_dtype = DType::f64;
  GrpoBatchCounts counts;
  Rollouts s{build_grpo_micro_batches(rows, adv, opt, &counts), 0};
  s.tokens = counts.loss_tokens;
  Context ctx{&host_backend(), nullptr, DType::f64};
  fill_policy_logprobs(ctx, net, s.micro, false);
  return s;
}

TEST(GrpoTrainStep, on_policy_loss_is_minus_mean_advantage) {
  const model::ModelConfig cfg = tiny_model();
  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(5);
  Rollouts s = prepare(net, cfg, 10);  // some rows exceed 10 tokens: masked out
  double adv_sum = 0, tokens = 0;
  for (GrpoMicroBatch& mb : s.micro) {
    mb.data.generation_logprobs = mb.data.prev_logprobs;  // the generator agrees with the trainer
    const std::vector<double> m = grpo_token_mask(mb.batch);
    const int64_t T = mb.batch.labels.dim(1);
    for (size_t n = 0; n < m.size(); ++n) {
      const double w = m[n] * mb.data.sample_mask[n / static_cast<size_t>(T)];
      adv_sum += w * mb.data.advantages[n], tokens += w;
    }
  }
  EXPECT_EQ(tokens, s.tokens);
  LossFnSection c;
  c.reference_policy_kl_penalty = 0;
  c.use_importance_sampling_correction = true;  // w = 1 on-policy
  ClippedPGLoss loss(c);
  loss.set_data(loss_data_of(s.micro));
  train::AdamW opt(net.params(), {});
  train::TrainStep step(net, opt, train::StepConfig{1.0, {}});
  const train::StepResult r = step.run(batches_of(s.micro), loss, 1e-3, 1);
  EXPECT_EQ(r.normaliser, tokens);
  EXPECT_NEAR(r.loss, -adv_sum / tokens, 1e-12);
  EXPECT_NEAR(r.metrics.at("probs_ratio"), 1.0, 1e-12);
  EXPECT_NEAR(r.metrics.at("token_mult_prob_error"), 1.0, 1e-12);
  EXPECT_GT(r.grad_norm, 0.0);
}

// A global batch with nothing to train (every row's sample mask 0): NeMo RL's 0 / (0 + 1e-8) gives
// loss 0 and a zero gradient, and its optimizer still steps; ours the same, not an error. The
// extrema of no token stay +-inf here (the trainer logs them as -1, as NeMo RL's grpo.py does).
TEST(GrpoTrainStep, a_global_batch_with_nothing_to_train_gives_loss_zero) {
  const model::ModelConfig cfg = tiny_model();
  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(5);
  Rollouts s = prepare(net, cfg, 10);
  for (GrpoMicroBatch& mb : s.micro) std::fill(mb.data.sample_mask.begin(), mb.data.sample_mask.end(), 0.0);
  for (bool token_level : {true, false}) {
    LossFnSection c;
    c.reference_policy_kl_penalty = 0;
    c.token_level_loss = token_level;
    ClippedPGLoss loss(c);
    loss.set_data(loss_data_of(s.micro));
    train::AdamW opt(net.params(), {});
    train::TrainStep step(net, opt, train::StepConfig{1.0, {}});
    const train::StepResult r = step.run(batches_of(s.micro), loss, 1e-3, 1);
    EXPECT_EQ(r.normaliser, 0.0);
    EXPECT_EQ(r.loss, 0.0);
    EXPECT_EQ(r.grad_norm, 0.0);
    EXPECT_EQ(opt.steps_taken(), 1);
    EXPECT_EQ(r.metrics.at("num_valid_samples"), 0.0);
    EXPECT_TRUE(std::isinf(r.metrics.at("probs_ratio_min")));
  }
  // Cross-entropy (pretraining, SFT) still refuses a batch without a label.
  train::MaskedCrossEntropy ce;
  EXPECT_FALSE(ce.zero_when_empty());
}

// Sampling at temperature t: the trainer's log-probs are log softmax(logits / t), what the
// engine reports as processed log-probs; logits() stays raw.
TEST(GrpoTrainStep, logit_temperature_divides_the_logits) {
  const model::ModelConfig cfg = tiny_model();
  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(4);
  const int64_t T = 7, V = cfg.vocab_size;
  std::vector<int32_t> ids, next;
  for (int64_t i = 0; i < T + 1; ++i) ids.push_back(static_cast<int32_t>((7 * i + 3) % V));
  next.assign(ids.begin() + 1, ids.end());
  ids.pop_back();
  const Tensor in = Tensor::from_vector<int32_t>({1, T}, ids), tg = Tensor::from_vector<int32_t>({1, T}, next);
  Context ctx{&host_backend(), nullptr, DType::f64};
  const std::vector<double> z = net.logits(ctx, in).to_f64_vector();
  for (double t : {1.0, 0.6, 1.7}) {
    net.set_logit_temperature(t);
    const std::vector<double> lp = net.token_logprobs(ctx, in, tg).to_f64_vector();
    for (int64_t n = 0; n < T; ++n) {
      const double* row = z.data() + n * V;
      double m = row[0], sum = 0;
      for (int64_t v = 0; v < V; ++v) m = std::max(m, row[v] / t);
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] / t - m);
      EXPECT_NEAR(lp[static_cast<size_t>(n)], row[next[static_cast<size_t>(n)]] / t - m - std::log(sum), 1e-12)
          << "t " << t << " token " << n;
    }
  }
  EXPECT_THROW(net.set_logit_temperature(0.0), InputError);
}

class GrpoTrainStepGrad : public ::testing::TestWithParam<double> {};

TEST_P(GrpoTrainStepGrad, parameter_gradients_match_finite_differences) {
  const model::ModelConfig cfg = tiny_model();
  model::HybridModel net(cfg, host_backend(), DType::f64);
  net.init(6);
  net.set_logit_temperature(GetParam());
  Rollouts s = prepare(net, cfg, 64);
  // Off-policy data: old log-probs away from the current ones (clipping on both sides), the
  // generator slightly off (IS correction), a reference policy (KL).
  Philox rng(3);
  uint64_t k = 0;
  for (GrpoMicroBatch& mb : s.micro) {
    mb.data.reference_logprobs = mb.data.prev_logprobs;
    for (size_t n = 0; n < mb.data.prev_logprobs.size(); ++n) {
      mb.data.prev_logprobs[n] += 1.2 * (rng.uniform(k++) - 0.5);
      mb.data.generation_logprobs[n] = mb.data.prev_logprobs[n] + 0.2 * (rng.uniform(k++) - 0.5);
      mb.data.reference_logprobs[n] += 1.0 * (rng.uniform(k++) - 0.5);
    }
  }
  LossFnSection c;
  c.reference_policy_kl_penalty = 0.05;
  c.ratio_clip_max = 0.28;
  c.ratio_clip_c = 3.0;
  c.use_importance_sampling_correction = true;
  c.use_on_policy_kl_approximation = true;  // its weight keeps its gradient: a true derivative
  ClippedPGLoss loss(c);
  loss.set_data(loss_data_of(s.micro));
  const std::vector<model::Batch> batches = batches_of(s.micro);

  train::AdamW opt(net.params(), {});
  train::TrainStep step(net, opt, train::StepConfig{0.0, {}});  // no gradient clipping
  // lr 0: the update leaves the weights, so the gradients left in the store belong to them.
  const train::StepResult r = step.run(batches, loss, 0.0, 1);
  EXPECT_GT(r.metrics.at("clip_fraction_lower"), 0.0);
  EXPECT_GT(r.metrics.at("clip_fraction_upper"), 0.0);

  Context ctx{&host_backend(), nullptr, DType::f64};
  auto step_loss = [&] {
    double sum = 0;
    for (size_t i = 0; i < batches.size(); ++i)
      sum += train::forward_loss(ctx, net, batches[i], loss, static_cast<int64_t>(i));
    return sum / r.normaliser;
  };
  EXPECT_NEAR(step_loss(), r.loss, 1e-12);
  int checked = 0;
  for (model::Param* p : net.params().all()) {
    if (!p->requires_grad) continue;
    const std::vector<double> grad = p->grad.to_f64_vector();
    double* v = p->value.data<double>();
    for (int64_t i : {int64_t{0}, p->value.numel() / 2, p->value.numel() - 1}) {
      const double keep = v[i], h = 1e-6;
      v[i] = keep + h;
      const double up = step_loss();
      v[i] = keep - h;
      const double down = step_loss();
      v[i] = keep;
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(grad[static_cast<size_t>(i)], fd, 1e-7 + 1e-5 * std::fabs(fd)) << p->name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

// 1: the raw logits; 0.7: NeMo RL's tempered log-probs (the head's scale enters the gradient).
INSTANTIATE_TEST_SUITE_P(Temperatures, GrpoTrainStepGrad, ::testing::Values(1.0, 0.7));

}  // namespace
}  // namespace nemotron::rl
