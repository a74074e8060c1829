// Start-up memory under gradient sharding (Megatron FSDP's optim_grads, train/grad_slots.h): the
// whole float32 gradients never exist on a rank. A backend that counts its own bytes holds the
// model; its peak over constructing the model (gradients deferred, as the pretrain and SFT
// commands build it under optim_grads), the sharded AdamW and the TrainStep must stay below
// whole weights + the rank's 1/D of the gradients and moments + GradSlots' buffers + a margin.
// That bound is below what a start-up holding the whole gradients beside the rank's state peaks at
// (the start-up before deferred gradients: 998,400 B against this model's 877,312 B bound; now
// 860,928 B), so the check can fail. A step then trains the deferred store
// like the eager one (a data group of two mirrored members: the same update).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>

#include "model/hybrid_model.h"
#include "train/batch_source.h"
#include "train/grad_slots.h"
#include "train/loss.h"
#include "train/train_step.h"
#include "train/mirror_pair.h"
#include "train/train_fixtures.h"

namespace nemotron::train {
namespace {

// Host memory with a byte count of its own (the process-wide host backend's peak covers every
// test that ran before).
class CountingBackend final : public Backend {
 public:
  Device device() const override { return host_backend().device(); }
  std::string name() const override { return "counting-cpu"; }
  void* allocate(size_t bytes) override {
    void* p = host_backend().allocate(bytes);
    in_use_ += bytes;
    peak_ = std::max(peak_, in_use_);
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    host_backend().deallocate(ptr, bytes);
    in_use_ -= bytes;
  }
  void fill_zero(void* ptr, size_t bytes) override { host_backend().fill_zero(ptr, bytes); }
  void copy_to_host(void* d, const void* s, size_t n) override { host_backend().copy_to_host(d, s, n); }
  void copy_from_host(void* d, const void* s, size_t n) override { host_backend().copy_from_host(d, s, n); }
  void copy_on_device(void* d, const void* s, size_t n) override { host_backend().copy_on_device(d, s, n); }
  void synchronize() override {}
  size_t bytes_in_use() const override { return in_use_; }
  size_t peak_bytes() const override { return peak_; }

 private:
  size_t in_use_ = 0, peak_ = 0;
};

// Twelve trunk layers and a small vocabulary: the trunk's gradients dominate, as in a real model.
PretrainConfig deep_config() {
  return testing::tiny_train_config({"model.hybrid_override_pattern=\"M*-EM*-EM*-E\""});
}

std::shared_ptr<parallel::ProcessGroups> mirrored_groups() {
  auto pair = std::make_shared<testing::MirrorPair>();
  auto g = std::make_shared<parallel::ProcessGroups>();
  g->world = g->data = g->data_context = g->expert = g->expert_data = pair;
  g->tensor = g->context = std::make_shared<parallel::SelfCommunicator>();
  return g;
}

struct Built {
  CountingBackend backend;
  std::unique_ptr<model::HybridModel> net;
  std::unique_ptr<AdamW> opt;
  std::unique_ptr<TrainStep> step;
  size_t weight_bytes = 0, bound = 0;
  size_t model_peak = 0;  // the peak once the model is built and initialised, before the optimizer
};

// Model + AdamW (optim_grads over the mirrored pair) + TrainStep on `b`'s backend; the bound
// from what the steady state holds.
void build(Built& b, const PretrainConfig& cfg, bool defer_grads, std::shared_ptr<parallel::ProcessGroups> g) {
  b.net = std::make_unique<model::HybridModel>(cfg.model, b.backend, DType::f32, model::ModelShard{}, true, defer_grads);
  b.net->init(7);
  b.model_peak = b.backend.peak_bytes();
  b.opt = std::make_unique<AdamW>(b.net->params(), AdamWConfig{}, g->data.get(), nullptr, nullptr,
                                  kDefaultGradBucketElements, Fsdp::grads);
  b.step = std::make_unique<TrainStep>(*b.net, *b.opt, StepConfig{1.0, cfg.moe, cfg.seed, g, 2000});
  for (const model::Param* p : b.net->params().all()) b.weight_bytes += p->value.nbytes();
  const GradSlots& slots = *b.step->grad_slots();
  const size_t margin = 16 << 10;  // the step's small tensors (router statistics and the like)
  b.bound = b.weight_bytes + static_cast<size_t>(b.opt->state_bytes() + slots.slice_bytes() + slots.buffer_bytes()) +
            margin;
}

TEST(FsdpStartup, TheWholeGradientsNeverExistUnderOptimGrads) {
  const PretrainConfig cfg = deep_config();
  Built lazy, eager;
  build(lazy, cfg, true, mirrored_groups());
  build(eager, cfg, false, mirrored_groups());
  const GradSlots& slots = *lazy.step->grad_slots();
  std::printf("weights %zu B, whole gradients %lld B, 1/2 state + slices %lld B, slots %lld B; peak %zu B deferred, "
              "%zu B eager; bound %zu B; model alone %zu B deferred, %zu B eager\n",
              lazy.weight_bytes, static_cast<long long>(slots.whole_bytes()),
              static_cast<long long>(lazy.opt->state_bytes() + slots.slice_bytes()),
              static_cast<long long>(slots.buffer_bytes()), lazy.backend.peak_bytes(), eager.backend.peak_bytes(),
              lazy.bound, lazy.model_peak, eager.model_peak);
  EXPECT_LT(lazy.backend.peak_bytes(), lazy.bound);
  // The bound tells a start-up that held the whole gradients beside the rank's state (the old
  // one: the flat buffer, then the shard's state, then the slots) apart from this one ...
  EXPECT_LT(lazy.bound, lazy.weight_bytes + static_cast<size_t>(lazy.opt->state_bytes() + slots.slice_bytes() +
                                                                  slots.whole_bytes()));
  // ... and the model alone holds its weights and no gradient, where an eager store (every store
  // before) holds the whole gradients from construction.
  EXPECT_EQ(lazy.model_peak, lazy.weight_bytes);
  EXPECT_GE(eager.model_peak, eager.weight_bytes + static_cast<size_t>(slots.whole_bytes()));
  EXPECT_FALSE(lazy.net->params().grad_buffer().defined());
  for (const model::Param* p : lazy.net->params().all())
    if (p->requires_grad) {
      EXPECT_TRUE(p->grad.defined()) << p->name << ": no slot after the TrainStep";
    }
}

TEST(FsdpStartup, ADeferredStoreTrainsLikeAnEagerOne) {
  const PretrainConfig cfg = deep_config();
  Built lazy, eager;
  build(lazy, cfg, true, mirrored_groups());
  build(eager, cfg, false, mirrored_groups());
  MockBatchSource a(cfg.model.vocab_size, 16, 2, 3, 0), b(cfg.model.vocab_size, 16, 2, 3, 0);
  MaskedCrossEntropy ce;
  for (int it = 1; it <= 2; ++it) {
    const StepResult x = lazy.step->run({a.next(), a.next()}, ce, 1e-3, it);
    const StepResult y = eager.step->run({b.next(), b.next()}, ce, 1e-3, it);
    EXPECT_EQ(x.loss, y.loss) << "step " << it;
    EXPECT_EQ(x.grad_norm, y.grad_norm) << "step " << it;
  }
  for (const model::Param* p : eager.net->params().all())
    EXPECT_EQ(lazy.net->params().get(p->name).value.to_f64_vector(), p->value.to_f64_vector()) << p->name;
}

// Without sharding (a data group of one, or the distributed optimizer alone) a deferred store's
// gradients are allocated by the optimizer: the same training as an eager store.
TEST(FsdpStartup, ADeferredStoreGetsItsGradientsFromAnyOptimizer) {
  const PretrainConfig cfg = deep_config();
  model::HybridModel net(cfg.model, host_backend(), DType::f32, {}, true, true);
  for (const model::Param* p : net.params().all()) EXPECT_FALSE(p->grad.defined()) << p->name;
  AdamW opt(net.params(), {});
  for (const model::Param* p : net.params().all()) EXPECT_EQ(p->grad.defined(), p->requires_grad) << p->name;
  model::HybridModel sharded(cfg.model, host_backend(), DType::f32, {}, true, true);
  testing::MirrorPair pair;
  AdamW zero1(sharded.params(), {}, &pair);
  EXPECT_TRUE(sharded.params().grad_buffer().defined());
  for (const model::Param* p : sharded.params().all())
    if (p->requires_grad) {
      EXPECT_TRUE(sharded.params().in_grad_buffer(*p)) << p->name;
    }
}

}  // namespace
}  // namespace nemotron::train
