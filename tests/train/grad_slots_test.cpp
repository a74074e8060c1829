// Sharded gradients (train/grad_slots.h) through a communicator of two members whose other member
// holds the same gradients (a reduce-scatter gives twice rank 0's half): over two micro-batches
// whose "backward" writes known values layer by layer, the rank's slices hold twice their sum
// (every micro-batch's reduce-scatter added, the reused slots zeroed between layers); the store's
// flat buffer is gone; a micro-batch whose backward skipped a layer is refused. And
// model::Param::trunk_layer, which cuts the units: the trunk's layer for its parameters (LoRA
// adapters their weight's), -1 for the embedding, final norm, head and MTP blocks.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/hybrid_model.h"
#include "model/lora.h"
#include "train/grad_slots.h"
#include "train/mirror_pair.h"
#include "train/train_fixtures.h"

namespace nemotron::train {
namespace {

using testing::MirrorPair;

// Micro-batch m's gradient of parameter k, element i: distinct per (m, k, i).
float value(int m, size_t k, int64_t i) { return static_cast<float>((m + 1) * 0.5 + 0.01 * k + 1e-4 * (i % 97)); }

void add_values(model::Param& p, int m, size_t k) {
  for (int64_t i = 0; i < p.grad.numel(); ++i) p.grad.data<float>()[i] += value(m, k, i);
}

TEST(GradSlots, SlicesAccumulateEveryMicroBatchsReduceScatter) {
  const PretrainConfig cfg = testing::tiny_train_config();
  model::HybridModel net(cfg.model, host_backend(), DType::f32);
  net.init(7);
  MirrorPair pair;
  AdamW opt(net.params(), {}, &pair, nullptr, nullptr, kDefaultGradBucketElements, Fsdp::grads);
  Context ctx;
  GradSlots slots(net, opt, pair, ctx);
  EXPECT_FALSE(net.params().grad_buffer().defined()) << "the whole buffer outlived the slots";
  const auto& all = net.params().all();
  const int64_t L = net.config().num_layers();
  slots.begin_step();
  for (int m = 0; m < 2; ++m) {
    for (size_t k = 0; k < all.size(); ++k)  // the head's backward first: the outer unit
      if (all[k]->trunk_layer < 0 && opt.buffer_offset(k) >= 0) add_values(*all[k], m, k);
    for (int64_t layer = L - 1; layer >= 0; --layer) {
      for (size_t k = 0; k < all.size(); ++k)
        if (all[k]->trunk_layer == layer && opt.buffer_offset(k) >= 0) add_values(*all[k], m, k);
      (*slots.layer_hook())(layer);
    }
    slots.finish_micro_batch();
  }
  EXPECT_EQ(slots.reduce_scatters(), 2 * L);
  // Rank 0's slice of each bucket is its first half: parameter k's elements there.
  const Tensor shard = opt.shard_grads();
  int64_t checked = 0;
  for (size_t k = 0; k < all.size(); ++k) {
    const int64_t off = opt.buffer_offset(k);
    if (off < 0) continue;
    const GradBucket& b = *std::find_if(opt.shard_buckets().begin(), opt.shard_buckets().end(),
                                        [&](const GradBucket& g) { return g.begin <= off && off < g.end; });
    const int64_t half = (b.end - b.begin) / 2;
    for (int64_t i = 0; i < all[k]->value.numel() && off + i < b.begin + half; ++i, ++checked)
      ASSERT_FLOAT_EQ(shard.data<float>()[b.shard_at + off + i - b.begin], 2 * (value(0, k, i) + value(1, k, i)))
          << all[k]->name << " element " << i;
  }
  EXPECT_GT(checked, 0);

  // A backward that skipped a layer's hook is refused at the end of its micro-batch.
  slots.begin_step();
  for (int64_t layer = L - 1; layer >= 1; --layer) (*slots.layer_hook())(layer);
  EXPECT_ANY_THROW(slots.finish_micro_batch());
}

TEST(GradSlots, TrunkLayerIsTheRegisteringLayer) {
  const PretrainConfig cfg = testing::tiny_train_config(
      {"model.num_nextn_predict_layers=1", "model.mtp_hybrid_override_pattern=\"*-\"", "model.mtp_num_layers=1"});
  model::HybridModel net(cfg.model, host_backend(), DType::f32);
  model::attach_lora(net.params(), model::LoraConfig{}, 7, "test");
  int64_t trunk = 0, outer = 0, adapters = 0;
  for (const model::Param* p : net.params().all()) {
    const std::string& n = p->name;
    const size_t at = n.find("layers.");
    if (n.find("mtp") == std::string::npos && at != std::string::npos) {
      EXPECT_EQ(p->trunk_layer, std::stoll(n.substr(at + 7))) << n;
      ++trunk;
      adapters += n.find("lora_") != std::string::npos ? 1 : 0;
    } else {
      EXPECT_EQ(p->trunk_layer, -1) << n;
      ++outer;
    }
  }
  EXPECT_GT(trunk, 0);
  EXPECT_GT(outer, 2);  // the embedding, the final norm and an MTP block at least
  EXPECT_GT(adapters, 0);
}

}  // namespace
}  // namespace nemotron::train
