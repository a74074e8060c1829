// The planner (train/gpu_plan.h, model/shard_sizes.h): the parameters a rank of a tensor- and
// expert-parallel layout holds, counted from the config, equal what the built model registers
// (split tensors 1/TP, whole ones in full); the per-GPU memory follows the layout; a TP run is
// not refused for memory it does not need; the knob found fits; the tensor group's traffic
// matches a hand count.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/hybrid_model.h"
#include "model/model_info.h"
#include "model/shard_sizes.h"
#include "parallel/rank_layout.h"
#include "core/backend.h"
#include "train/gpu_plan.h"
#include "test_util.h"

namespace nemotron::testing {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string recipe(const std::string& family, const std::string& stage, const std::string& name) {
  return nemotron::testing::source_root().string() + "/recipes/" + family + "/" + stage + "/" + name + ".yaml";
}

// Super's tiny model (Mamba, attention, MLP, MoE with shared expert and latent, MTP) with every
// bias on, so row-split biases (whole) and column-split ones (split) are both counted.
model::ModelConfig tiny_super(std::vector<std::string> more = {}) {
  std::vector<std::string> o = {"model.use_bias=true", "model.use_conv_bias=true", "model.attention_bias=true",
                                "model.mlp_bias=true"};
  o.insert(o.end(), more.begin(), more.end());
  return model::load_model_config(recipe("super3", "pretrain", "tiny"), o);
}

int64_t registered(const model::ModelConfig& c, const model::ModelShard& s, int64_t* frozen = nullptr) {
  model::HybridModel net(c, host_backend(), DType::f32, s);
  if (frozen) *frozen = net.params().numel() - net.params().trainable_numel();
  return net.params().numel();
}

TEST(GpuPlan, shard_params_equal_what_each_rank_registers) {
  for (const model::ModelConfig& c :
       {tiny_super(), tiny_super({"model.use_bias=false", "model.attention_bias=false", "model.mlp_bias=false"}),
        model::load_model_config(recipe("super49b", "sft", "tiny")),
        model::load_model_config(recipe("nano3", "pretrain", "tiny"))}) {
    // Whole model: the published-style total of model_info.
    const model::ShardParams whole = model::shard_params(c, {});
    EXPECT_EQ(whole.total, model::model_info(c, 16).total_params);
    int64_t frozen = 0;
    EXPECT_EQ(whole.total, registered(c, {}, &frozen));
    EXPECT_EQ(whole.frozen, frozen);
    for (int tp : {2}) {
      for (int ep : {1, 2}) {
        if (ep > 1 && model::routed_experts(c) == 0) continue;
        for (int er = 0; er < ep; ++er)
          for (int tr = 0; tr < tp; ++tr) {
            const model::ModelShard s{er, ep, tr, tp};
            const model::ShardParams p = model::shard_params(c, s);
            EXPECT_EQ(p.total, registered(c, s, &frozen)) << c.hybrid_override_pattern << " ep " << er << "/" << ep
                                                          << " tp " << tr << "/" << tp;
            EXPECT_EQ(p.frozen, frozen);
          }
      }
    }
  }
}

TEST(GpuPlan, shard_params_with_fewer_kv_groups_than_tensor_ranks) {
  // TP 4 over 2 KV groups (as Nemotron 3 Super's 2 at TP 8): k_proj / v_proj and their biases
  // whole on every rank, counted as whole, equal to what each rank registers.
  const model::ModelConfig c = tiny_super({"model.n_groups=4"});
  ASSERT_EQ(c.num_key_value_heads, 2);
  const model::ShardParams split2 = model::shard_params(c, {0, 1, 0, 2}), shared4 = model::shard_params(c, {0, 1, 0, 4});
  EXPECT_GT(shared4.whole, split2.whole);
  for (int tr = 0; tr < 4; ++tr) EXPECT_EQ(model::shard_params(c, {0, 1, tr, 4}).total, registered(c, {0, 1, tr, 4}));
}

TEST(GpuPlan, shard_params_by_hand) {
  // One attention layer, H 8, 2 heads and 2 KV heads of 4, vocabulary 16, biases, TP 2:
  // embedding and head 16 x 8 / 2 each, final norm and pre-norm 8 whole, q/k/v/o 8 x 8 / 2 each,
  // q/k/v biases 8 / 2 each, o's bias 8 whole.
  const model::ModelConfig c = model::load_model_config(
      recipe("super3", "pretrain", "tiny"),
      {"model.hybrid_override_pattern=\"*\"", "model.hidden_size=8", "model.num_attention_heads=2",
       "model.num_key_value_heads=2", "model.head_dim=4", "model.vocab_size=16", "model.attention_bias=true",
       "model.num_nextn_predict_layers=0", "model.mtp_hybrid_override_pattern=", "model.mtp_num_layers=0"});
  const model::ShardParams p = model::shard_params(c, {0, 1, 1, 2});
  EXPECT_EQ(p.total, 64 + 64 + 8 + 8 + 4 * 32 + 3 * 4 + 8);
  EXPECT_EQ(p.whole, 8 + 8 + 8);
  EXPECT_EQ(p.total, registered(c, {0, 1, 1, 2}));
}

train::GpuPlanInput input(const model::ModelConfig& c, int world, int tp, int ep = 1) {
  train::GpuPlanInput in;
  in.model = c;
  in.model.parallel.tensor = tp;
  in.model.parallel.expert = ep;
  in.world = world;
  in.micro_batch_size = 2;
  in.seq_length = 64;
  in.global_batch_size = 16;
  return in;
}

parallel::RankLayout layout(const train::GpuPlanInput& in) {
  return parallel::RankLayout(in.model.parallel, in.world, model::layout_facts(in.model), "test");
}

TEST(GpuPlan, memory_per_gpu_follows_the_layout) {
  const model::ModelConfig c = tiny_super();
  const train::GpuPlanInput one = input(c, 2, 1), two = input(c, 2, 2);
  const train::GpuMemory m1 = train::gpu_memory(one, layout(one)), m2 = train::gpu_memory(two, layout(two));
  EXPECT_EQ(m2.weights, 2.0 * static_cast<double>(registered(c, {0, 1, 0, 2})));  // bf16
  EXPECT_EQ(m2.grads, 4.0 * static_cast<double>(m2.params.trainable()));           // float32, not sharded
  EXPECT_EQ(m2.optimizer, 12.0 * static_cast<double>(m2.params.trainable()));
  EXPECT_LT(m2.weights, m1.weights);
  EXPECT_LT(m2.activations_kept, m1.activations_kept);  // heads and widths split ...
  EXPECT_GT(m2.activations_kept, m1.activations_kept / 2);  // ... the residual stream is not
  EXPECT_LT(m1.activations_recompute, m1.activations_kept);
  EXPECT_FALSE(m1.recompute);
  train::GpuPlanInput rc = one;
  rc.model.recompute_granularity = "full";
  EXPECT_EQ(train::gpu_memory(rc, layout(rc)).total(), m1.total() - m1.activations_kept + m1.activations_recompute);
  // The distributed optimizer splits the masters and moments over the data group.
  train::GpuPlanInput dist = one;
  dist.distributed_optimizer = true;
  const train::GpuMemory md = train::gpu_memory(dist, layout(dist));
  EXPECT_DOUBLE_EQ(md.optimizer, m1.optimizer / 2);
  // Expert parallelism: half the experts, whose state the distributed optimizer leaves whole.
  train::GpuPlanInput ep = input(c, 2, 1, 2);
  ep.distributed_optimizer = true;
  const train::GpuMemory me = train::gpu_memory(ep, layout(ep));
  const double E = static_cast<double>(me.params.routed_experts), D = static_cast<double>(me.params.trainable()) - E;
  EXPECT_DOUBLE_EQ(me.optimizer, 12.0 * (D / 2 + E));
}

TEST(GpuPlan, a_tensor_parallel_run_is_not_refused_for_memory_it_does_not_need) {
  const model::ModelConfig c = tiny_super();
  const train::GpuPlanInput one = input(c, 2, 1), two = input(c, 2, 2);
  const double t1 = train::gpu_memory(one, layout(one)).total(), t2 = train::gpu_memory(two, layout(two)).total();
  const double budget = (t1 + t2) / 2;
  EXPECT_EQ(train::gpu_memory_shortfall(two, budget), "");
  const std::string why = train::gpu_memory_shortfall(one, budget);
  EXPECT_NE(why.find("does not fit one GPU"), std::string::npos) << why;
  EXPECT_NE(why.find("knob: set "), std::string::npos) << why;
  EXPECT_EQ(train::gpu_memory_shortfall(one, 0), "");  // unknown: not refused
}

TEST(GpuPlan, the_knob_found_fits_and_is_the_cheapest) {
  const model::ModelConfig c = tiny_super();
  const train::GpuPlanInput in = input(c, 4, 1);
  const train::GpuMemory m = train::gpu_memory(in, layout(in));
  EXPECT_TRUE(train::find_knob(in, 1e15).fits);  // it fits already: nothing to turn
  EXPECT_TRUE(train::find_knob(in, 1e15).overrides.empty());
  // Just below the total: sharding the optimizer over 4 data ranks is enough and the cheapest.
  const train::Knob k = train::find_knob(in, m.total() - 1);
  ASSERT_TRUE(k.fits);
  EXPECT_EQ(k.overrides, std::vector<std::string>{"ddp.use_distributed_optimizer=true"});
  EXPECT_LE(k.memory, m.total() - 1);
  // Too small for anything: no knob, and the text says so.
  EXPECT_FALSE(train::find_knob(in, 1024).fits);
  EXPECT_NE(train::gpu_plan_text(in, 1024, "test").find("knob: nothing fits"), std::string::npos);
  // Found knobs fit when applied.
  const train::Knob big = train::find_knob(in, m.total() / 2);
  ASSERT_TRUE(big.fits);
  EXPECT_LE(big.memory, m.total() / 2);
}

TEST(GpuPlan, tensor_traffic_by_hand) {
  const model::ModelConfig c = tiny_super();
  const train::GpuPlanInput in = input(c, 4, 2);
  const parallel::RankLayout l = layout(in);
  const std::vector<train::GroupTraffic> t = train::step_traffic(in, l);
  const train::GroupTraffic* tensor = nullptr;
  for (const train::GroupTraffic& g : t)
    if (g.group == "tensor") tensor = &g;
  ASSERT_NE(tensor, nullptr);
  // Trunk "M*M-ME" (6 split layers, 1 MoE) + 2 MTP depths of "*E" (4 split, 2 MoE); 1 + 2 head
  // passes; N = 2 x 64 rows, H 64, top-2; 16 / (2 x 2 data ranks) = 4 micro-batches; the latent
  // projections (2 x 32 x 64) of 2 registered MoE layers once per step.
  const double N = 128, H = 64, micro = 4;
  const double reduced = 2 * N * H * (2 * 10 + 2 * 3) + 4 * N * 2 * 3, gathered = 3 * 4 * 3 * N * 2;
  const double latent = 4.0 * 2 * 32 * 64 * 2;
  EXPECT_DOUBLE_EQ(tensor->buffer_bytes, micro * (reduced + gathered) + latent);
  EXPECT_DOUBLE_EQ(tensor->sent_bytes, micro * (reduced + gathered / 2) + latent);  // n = 2: 2(n-1)/n = 1
}

// The values per token a layer's mixer keeps, counted from the config, against what a forward
// with saved activations holds on the CPU (float32; bytes in use before and after): each block
// kind alone, the normed input, residual input, rstd and output subtracted. (The estimate of a
// GPU run counts the same values in bf16.)
TEST(GpuPlan, saved_activations_match_a_measured_forward) {
  for (const char* pattern : {"M", "*", "-", "E"}) {
    model::ModelConfig c = tiny_super({"model.num_nextn_predict_layers=0", "model.mtp_num_layers=0", "model.use_bias=false",
                                       "model.attention_bias=false", "model.mlp_bias=false",
                                       fmt::format("model.hybrid_override_pattern=\"{}\"", pattern)});
    c.mtp_hybrid_override_pattern = "";
    model::HybridModel net(c, host_backend(), DType::f32);
    net.init(1);
    const int64_t B = 2, T = 64, H = c.hidden_size;
    std::vector<int32_t> ids(B * T);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7) % c.vocab_size);
    const Tensor t = Tensor::from_vector<int32_t>({B, T}, ids);
    Context ctx;
    const size_t before = host_backend().bytes_in_use();
    model::Activations act;
    const Tensor x = net.forward(ctx, t, &act);
    const double measured = static_cast<double>(host_backend().bytes_in_use() - before) / 4 / (B * T) - 3 * H - 1;
    // (The MoE also keeps its E per-expert counts: 16 bytes per layer, not per token.)
    EXPECT_NEAR(measured, train::mixer_saved_per_token(c, c.layer_kind(0), 1), 0.05) << pattern;
  }
}

// Sequence parallelism: the residual stream's rows split over the tensor group (a split mixer
// still keeps the input it gathers whole), and the tensor group's bytes in all-gathers and
// reduce-scatters, plus the whole parameters' partial gradients once per step.
TEST(GpuPlan, sequence_parallelism_splits_the_stream_and_changes_the_collectives) {
  const model::ModelConfig c = tiny_super();
  train::GpuPlanInput tp = input(c, 4, 2), sp = tp;
  sp.model.parallel.sequence_parallel = true;
  const train::GpuMemory a = train::gpu_memory(tp, layout(tp)), b = train::gpu_memory(sp, layout(sp));
  EXPECT_EQ(b.weights, a.weights);
  EXPECT_LT(b.activations_kept, a.activations_kept);
  EXPECT_LT(b.activations_recompute, a.activations_recompute);
  const std::vector<train::GroupTraffic> t = train::step_traffic(sp, layout(sp));
  const train::GroupTraffic* tensor = nullptr;
  for (const train::GroupTraffic& g : t)
    if (g.group == "tensor") tensor = &g;
  ASSERT_NE(tensor, nullptr);
  // 10 split layers x 4 of [N, H] bf16, 3 passes x (embedding reduce-scatter, head all-gather and
  // its adjoint) + the loss's all-gather; the MoE combine weights' all-reduce (3 MoE layers, top-2).
  const double N = 128, H = 64, micro = 4;
  const double spread = 2 * N * H * (4 * 10 + 3 * 3) + 3 * 4 * 3 * N * 2, reduced = 4 * N * 2 * 3;
  const double whole = 4.0 * static_cast<double>(b.params.whole);
  EXPECT_DOUBLE_EQ(tensor->buffer_bytes, micro * (spread + reduced) + whole);
  EXPECT_DOUBLE_EQ(tensor->sent_bytes, micro * (spread / 2 + reduced) + whole);
  // The knob may turn it on: with the optimizer already sharded, just under the TP 2 run's total,
  // sequence parallelism alone fits.
  tp.distributed_optimizer = true;
  const train::Knob k = train::find_knob(tp, train::gpu_memory(tp, layout(tp)).total() - 1);
  ASSERT_TRUE(k.fits);
  EXPECT_EQ(k.overrides, std::vector<std::string>{"model.sequence_parallel=true"});
}

}  // namespace
}  // namespace nemotron::testing
