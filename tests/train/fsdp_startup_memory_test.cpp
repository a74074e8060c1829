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

#include <filesystem>

#include "model/hybrid_model.h"
#include "model/weights_io.h"
#include "train/checkpoint.h"
#include "train/param_gather.h"
#include "train/shard_weight_sink.h"
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
  void reset_peak() { peak_ = in_use_; }

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

// The float32 masters of a bf16 model under the distributed optimizer and both FSDP strategies
// exist only as the rank's slices, start-up included: with the masters deferred
// (ParamStore::defer_masters, as the training commands build the model) the peak over building the
// model and the optimizer is what the rank then holds; whole masters made before the optimizer
// (create_masters, every start-up before) add a transient of 4 B per trainable parameter. The
// slices hold the same float32 values either way.
struct MasterStartup {
  CountingBackend backend;
  std::unique_ptr<model::HybridModel> net;
  std::unique_ptr<AdamW> opt;
  size_t peak = 0, held = 0;
};

void build_bf16(MasterStartup& b, const PretrainConfig& cfg, Fsdp fsdp, bool defer, parallel::Communicator& pair) {
  b.net = std::make_unique<model::HybridModel>(cfg.model, b.backend, DType::bf16, model::ModelShard{}, true,
                                               fsdp != Fsdp::off);
  b.net->init(7);
  if (defer) b.net->params().defer_masters();
  else b.net->params().create_masters();
  b.opt = std::make_unique<AdamW>(b.net->params(), AdamWConfig{}, &pair, nullptr, nullptr, kDefaultGradBucketElements,
                                  fsdp);
  b.peak = b.backend.peak_bytes();
  b.held = b.backend.bytes_in_use();
}

TEST(FsdpStartup, TheWholeMastersNeverExistUnderAnySharding) {
  const PretrainConfig cfg = deep_config();
  for (const Fsdp fsdp : {Fsdp::off, Fsdp::grads, Fsdp::grads_params}) {
    testing::MirrorPair p1, p2;
    MasterStartup lazy, eager;
    build_bf16(lazy, cfg, fsdp, true, p1);
    build_bf16(eager, cfg, fsdp, false, p2);
    const size_t whole_masters = static_cast<size_t>(lazy.net->params().trainable_numel()) * 4;
    std::printf("fsdp %d: whole masters %zu B; peak %zu B deferred (holds %zu B), %zu B made whole first (holds %zu B)\n",
                static_cast<int>(fsdp), whole_masters, lazy.peak, lazy.held, eager.peak, eager.held);
    EXPECT_TRUE(lazy.opt->shards_masters());
    EXPECT_FALSE(lazy.net->params().masters_deferred());
    EXPECT_EQ(lazy.held, eager.held);
    EXPECT_EQ(lazy.peak, lazy.held) << "a transient beyond what the rank keeps";
    EXPECT_GE(eager.peak, eager.held + whole_masters);  // what the check tells apart
    for (const model::Param* p : lazy.net->params().all()) EXPECT_FALSE(p->master.defined()) << p->name;
    for (size_t k = 0; k < lazy.net->params().all().size(); ++k) {
      const Tensor a = lazy.opt->master_piece(k), b = eager.opt->master_piece(k);
      ASSERT_EQ(a.defined(), b.defined()) << k;
      if (a.defined()) {
        EXPECT_EQ(a.to_f64_vector(), b.to_f64_vector()) << lazy.net->params().all()[k]->name;
      }
    }
  }
}

// Without sharding the deferred masters are made whole by the optimizer: what create_masters()
// gives.
TEST(FsdpStartup, DeferredMastersAreWholeWithoutSharding) {
  const PretrainConfig cfg = deep_config();
  model::HybridModel a(cfg.model, host_backend(), DType::bf16), b(cfg.model, host_backend(), DType::bf16);
  a.init(7), b.init(7);
  a.params().defer_masters();
  b.params().create_masters();
  for (const model::Param* p : a.params().all()) EXPECT_FALSE(p->master.defined()) << p->name;
  AdamW oa(a.params(), {}), ob(b.params(), {});
  for (const model::Param* p : b.params().all()) {
    const model::Param& q = a.params().get(p->name);
    ASSERT_EQ(q.master.defined(), p->master.defined()) << p->name;
    if (p->master.defined()) {
      EXPECT_EQ(q.master.to_f64_vector(), p->master.to_f64_vector()) << p->name;
    }
  }
}

// A checkpoint load under full parameter sharding writes only the rank's slices
// (train/shard_weight_sink.h): it allocates nothing on the model's device, where the load before
// (whole masters and values gathered, loaded, sharded back) allocated both whole; the slices and
// the gathered outer unit equal that load's bit for bit.
struct FsdpRun {
  testing::MirrorPair pair;
  MasterStartup b;
  std::unique_ptr<TrainStep> step;
};

void build_fsdp_run(FsdpRun& r, const PretrainConfig& cfg) {
  build_bf16(r.b, cfg, Fsdp::grads_params, true, r.pair);
  auto g = std::make_shared<parallel::ProcessGroups>();
  auto pair = std::shared_ptr<parallel::Communicator>(&r.pair, [](parallel::Communicator*) {});
  g->world = g->data = g->data_context = g->expert = g->expert_data = pair;
  g->tensor = g->context = std::make_shared<parallel::SelfCommunicator>();
  r.step = std::make_unique<TrainStep>(*r.b.net, *r.b.opt, StepConfig{1.0, cfg.moe, cfg.seed, g, 2000});
  ASSERT_NE(r.step->param_gather(), nullptr);
}

// Full parameter sharding's buffers (the outer unit, two layer slots) are allocated once the whole
// values they replace are freed (ParamGather::point_values): building the step never holds both.
// Before, the peak was the final holding + the whole values W; now at most the final holding +
// W - the buffers B (the gradient slots are allocated while the whole values still exist).
TEST(FsdpStartup, TheGatherBuffersNeverExistBesideTheWholeValues) {
  const PretrainConfig cfg = deep_config();
  FsdpRun r;
  build_fsdp_run(r, cfg);
  const ParamGather& g = *r.step->param_gather();
  const size_t held = r.b.backend.bytes_in_use(), peak = r.b.backend.peak_bytes();
  const size_t W = static_cast<size_t>(g.sharded_bytes()), B = static_cast<size_t>(g.buffer_bytes());
  std::printf("held %zu B, peak %zu B; whole sharded values %zu B, gather buffers %zu B; bound %zu B\n", held, peak, W,
              B, held + (W > B ? W - B : 0));
  EXPECT_LE(peak, held + (W > B ? W - B : 0));
}

TEST(FsdpStartup, ALoadWritesOnlyTheRanksSlicesUnderFullSharding) {
  const PretrainConfig cfg = deep_config();
  const std::string dir = ::testing::TempDir() + "fsdp_startup_load";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {  // the checkpoint: other weights (another seed), float32 masters as a run saves them
    model::HybridModel src(cfg.model, host_backend(), DType::bf16);
    src.init(11);
    src.params().create_masters();
    model::save_weights(dir, src.params());
  }
  FsdpRun now, before;
  build_fsdp_run(now, cfg);
  build_fsdp_run(before, cfg);
  const size_t whole_masters = static_cast<size_t>(now.b.net->params().trainable_numel()) * 4;

  now.b.backend.reset_peak();
  const size_t held = now.b.backend.bytes_in_use();
  const ShardWeightSink sink(*now.b.opt, now.b.net->params());
  load_checkpoint_weights(dir, now.b.net->params(), "", &sink);
  now.step->param_gather()->refresh();
  const size_t load_peak = now.b.backend.peak_bytes() - held;

  before.b.backend.reset_peak();
  const size_t held_before = before.b.backend.bytes_in_use();
  before.b.opt->unshard_masters();
  before.step->param_gather()->unshard();
  load_checkpoint_weights(dir, before.b.net->params());
  before.b.opt->shard_masters();
  before.step->param_gather()->reshard();
  const size_t load_peak_before = before.b.backend.peak_bytes() - held_before;
  std::printf("load under optim_grads_params: %zu B beyond what the rank holds (the whole-tensor load: %zu B; whole "
              "masters %zu B)\n",
              load_peak, load_peak_before, whole_masters);
  EXPECT_EQ(load_peak, 0u);
  EXPECT_GE(load_peak_before, whole_masters);  // what the check tells apart
  EXPECT_EQ(now.b.backend.bytes_in_use(), held);

  EXPECT_EQ(now.b.opt->value_shard().to_f64_vector(), before.b.opt->value_shard().to_f64_vector());
  const auto& all = now.b.net->params().all();
  for (size_t k = 0; k < all.size(); ++k) {
    const Tensor a = now.b.opt->master_piece(k), b = before.b.opt->master_piece(k);
    ASSERT_EQ(a.defined(), b.defined()) << all[k]->name;
    if (a.defined()) {
      EXPECT_EQ(a.to_f64_vector(), b.to_f64_vector()) << all[k]->name;
    }
    if (all[k]->trunk_layer < 0) {  // the outer unit: gathered whole after the load
      EXPECT_EQ(all[k]->value.to_f64_vector(), before.b.net->params().all()[k]->value.to_f64_vector()) << all[k]->name;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nemotron::train
