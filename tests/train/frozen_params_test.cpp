// Frozen parameters (requires_grad false) cost nothing and change nothing else: no gradient, no
// master, no optimizer moments, no checkpointed moments; every other gradient and update is
// bit-identical to a run where nothing is frozen. The frozen set covers each way a block skips
// gradient work: Linear dW (attention, MLP, Mamba in_proj/out_proj), the LM head and embedding,
// fused small-parameter gradients (norms, conv, dt_bias, A_log, D) and the grouped expert GEMMs
// (all up_proj experts frozen: no dW at all; one down_proj expert frozen among trainable ones).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <unistd.h>

#include "core/rng.h"
#include "io/safetensors.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/train_step.h"
#include "train_fixtures.h"

namespace nemotron::train {
namespace {

namespace fs = std::filesystem;
using testing::tiny_train_config;

std::set<std::string> frozen_names(const model::ModelConfig& cfg) {
  std::set<std::string> s{"backbone.embeddings.weight",
                          "backbone.layers.0.norm.weight",
                          "backbone.layers.0.mixer.in_proj.weight",
                          "backbone.layers.0.mixer.out_proj.weight",
                          "backbone.layers.0.mixer.conv1d.weight",
                          "backbone.layers.0.mixer.conv1d.bias",
                          "backbone.layers.0.mixer.dt_bias",
                          "backbone.layers.0.mixer.A_log",
                          "backbone.layers.0.mixer.D",
                          "backbone.layers.0.mixer.norm.weight",
                          "backbone.layers.1.mixer.q_proj.weight",
                          "backbone.layers.1.mixer.o_proj.weight",
                          "backbone.layers.2.mixer.down_proj.weight",
                          "backbone.layers.3.mixer.experts.0.down_proj.weight",
                          "backbone.norm_f.weight",
                          "lm_head.weight"};
  for (int64_t e = 0; e < cfg.n_routed_experts; ++e)
    s.insert(fmt::format("backbone.layers.3.mixer.experts.{}.up_proj.weight", e));
  return s;
}

struct Net {
  model::HybridModel net;
  explicit Net(const model::ModelConfig& cfg, bool freeze) : net(cfg, host_backend(), DType::f64) {
    net.init(11);
    if (!freeze) return;
    for (const std::string& name : frozen_names(cfg)) net.params().set_requires_grad(net.params().get(name), false);
  }
};

model::Batch batch(const model::ModelConfig& cfg, int64_t B, int64_t T, uint64_t seed) {
  Philox rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
  std::vector<double> mask(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(rng.bits(i) % cfg.vocab_size);
  for (size_t i = 0; i < ids.size(); ++i) {
    labels[i] = (i + 1) % T == 0 ? -100 : ids[i + 1];
    mask[i] = i % 3 == 0 ? 0.0 : 1.0;
  }
  return {Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, labels),
          Tensor::from_vector<double>({B, T}, mask)};
}

TEST(FrozenParams, get_no_gradient_and_leave_every_other_gradient_bit_identical) {
  const model::ModelConfig cfg = tiny_train_config().model;
  Net all(cfg, false), part(cfg, true);
  const std::set<std::string> frozen = frozen_names(cfg);
  for (const std::string& name : frozen) ASSERT_NE(all.net.params().find(name), nullptr) << name;
  Context ctx{&host_backend(), nullptr, DType::f64};
  const model::Batch b = batch(cfg, 2, 16, 3);
  const LossSum la = cross_entropy_backward(ctx, all.net, b, 0.25);
  const LossSum lb = cross_entropy_backward(ctx, part.net, b, 0.25);
  EXPECT_EQ(la.loss_sum, lb.loss_sum);
  int64_t compared = 0;
  for (const model::Param* p : part.net.params().all()) {
    if (frozen.count(p->name) || p->name.ends_with("e_score_correction_bias")) {
      EXPECT_FALSE(p->requires_grad) << p->name;
      EXPECT_FALSE(p->grad.defined()) << p->name << ": a frozen parameter holds a gradient";
      continue;
    }
    const model::Param& q = all.net.params().get(p->name);
    EXPECT_EQ(p->grad.to_f64_vector(), q.grad.to_f64_vector()) << p->name;
    ++compared;
  }
  EXPECT_GT(compared, 10);
  EXPECT_LT(part.net.params().trainable_numel(), all.net.params().trainable_numel());
}

TEST(FrozenParams, have_no_optimizer_state_and_stay_untouched_by_steps) {
  const model::ModelConfig cfg = tiny_train_config().model;
  Net all(cfg, false), part(cfg, true);
  const std::set<std::string> frozen = frozen_names(cfg);
  // No clipping: each parameter's update then depends on its own gradient only, so the trainable
  // ones move exactly as they do when nothing is frozen.
  AdamW opt_all(all.net.params(), {0.9, 0.95, 1e-8, 0.1}), opt_part(part.net.params(), {0.9, 0.95, 1e-8, 0.1});
  TrainStep step_all(all.net, opt_all, StepConfig{0.0, {}}), step_part(part.net, opt_part, StepConfig{0.0, {}});
  MaskedCrossEntropy ce;
  std::vector<std::vector<double>> before;
  for (const model::Param* p : part.net.params().all()) before.push_back(p->value.to_f64_vector());
  // One step (after it the frozen values differ between the two models, and so would the next
  // step's gradients).
  const std::vector<model::Batch> micro{batch(cfg, 2, 16, 11), batch(cfg, 2, 16, 21)};
  const StepResult ra = step_all.run(micro, ce, 1e-2, 1), rb = step_part.run(micro, ce, 1e-2, 1);
  EXPECT_EQ(ra.loss, rb.loss);
  EXPECT_LT(rb.grad_norm, ra.grad_norm);  // over the trainable gradients only
  const auto& ps = part.net.params().all();
  for (size_t k = 0; k < ps.size(); ++k) {
    const model::Param& p = *ps[k];
    if (!p.requires_grad) {
      EXPECT_FALSE(opt_part.first_moments()[k].defined()) << p.name;
      EXPECT_FALSE(opt_part.second_moments()[k].defined()) << p.name;
      EXPECT_EQ(p.value.to_f64_vector(), before[k]) << p.name << " moved although frozen";
    } else {
      EXPECT_EQ(p.value.to_f64_vector(), all.net.params().get(p.name).value.to_f64_vector()) << p.name;
    }
  }
}

TEST(FrozenParams, checkpoint_round_trips_without_their_moments) {
  const model::ModelConfig cfg = tiny_train_config().model;
  Net a(cfg, true);
  AdamW opt(a.net.params(), {});
  TrainStep step(a.net, opt, StepConfig{1.0, {}});
  MaskedCrossEntropy ce;
  step.run({batch(cfg, 2, 16, 5)}, ce, 1e-2, 1);
  const fs::path dir = fs::temp_directory_path() / fmt::format("nemotron_frozen_ckpt_{}", ::getpid());
  fs::remove_all(dir);
  TrainState st;
  st.iteration = 1, st.optimizer_steps = opt.steps_taken();
  const std::string iter = save_checkpoint(dir.string(), CheckpointContent{&a.net.params(), &opt, st, "{}\n"});
  io::SafetensorsFile f = io::SafetensorsFile::open((fs::path(iter) / "optimizer.safetensors").string());
  EXPECT_EQ(f.find("exp_avg.lm_head.weight"), nullptr);
  EXPECT_EQ(f.find("exp_avg_sq.backbone.embeddings.weight"), nullptr);
  EXPECT_NE(f.find("exp_avg.backbone.layers.1.mixer.k_proj.weight"), nullptr);

  // A fresh model with the same frozen set loads weights (frozen ones included) and moments.
  Net b(cfg, true);
  b.net.init(99);
  AdamW opt_b(b.net.params(), {});
  load_checkpoint_weights(iter, b.net.params());
  load_checkpoint_optimizer(iter, opt_b, b.net.params(), st.optimizer_steps);
  const auto& pa = a.net.params().all();
  for (size_t k = 0; k < pa.size(); ++k) {
    EXPECT_EQ(pa[k]->value.to_f64_vector(), b.net.params().all()[k]->value.to_f64_vector()) << pa[k]->name;
    if (pa[k]->requires_grad)
      EXPECT_EQ(opt.second_moments()[k].to_f64_vector(), opt_b.second_moments()[k].to_f64_vector()) << pa[k]->name;
  }
  EXPECT_EQ(opt_b.steps_taken(), 1);

  // A model that trains everything needs the moments the checkpoint does not have.
  Net c(cfg, false);
  AdamW opt_c(c.net.params(), {});
  try {
    load_checkpoint_optimizer(iter, opt_c, c.net.params(), 1);
    ADD_FAILURE() << "loaded moments that the checkpoint does not hold";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing tensor \"exp_avg.backbone.embeddings.weight\""), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(FrozenParams, unfreezing_restores_gradient_and_fresh_moments) {
  model::ParamStore store(host_backend(), DType::f64);
  model::Param& w = store.add("w", {2, 3});
  store.set_requires_grad(w, false);
  EXPECT_FALSE(w.grad.defined());
  AdamW opt(store, {});
  EXPECT_FALSE(opt.first_moments()[0].defined());
  store.set_requires_grad(w, true);
  ASSERT_TRUE(w.grad.defined());
  EXPECT_EQ(w.grad.to_f64_vector(), std::vector<double>(6, 0.0));
  w.grad.data<double>()[0] = 1.0;
  opt.step(0.1);
  ASSERT_TRUE(opt.first_moments()[0].defined());
  EXPECT_LT(w.value.data<double>()[0], 0.0);
}

}  // namespace
}  // namespace nemotron::train
