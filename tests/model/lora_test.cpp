// LoRA adapters beyond their gradient cases (lora_cases.cpp): PEFT names and shapes, which
// weights each Megatron target covers (never a routed expert), the frozen base, an adapter that
// starts as the identity (B = 0), the errors for bad targets, merge_lora giving the logits of
// base + adapter, and adapter dropout: only in training, reproducible from its key, and a
// backward that recomputes h drawing the forward's mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "block_configs.h"
#include "core/rng.h"
#include "harness.h"
#include "model/hybrid_model.h"
#include "core/op_profiler.h"
#include "model/linear.h"
#include "model/mamba2_mixer.h"
#include "model/lora.h"

namespace nemotron::testing {
namespace {

model::LoraConfig all_targets(int64_t dim) {
  model::LoraConfig c;
  c.target_modules = model::lora_target_names();
  c.dim = dim;
  c.alpha = 2.0 * static_cast<double>(dim);
  return c;
}

double max_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_f64_vector(), y = b.to_f64_vector();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::fabs(x[i] - y[i]));
  return d;
}

TEST(Lora, attaches_peft_names_freezes_the_base_and_starts_as_the_identity) {
  model::HybridModel net(hybrid_config("M*-E"), host_backend(), DType::f64);
  net.init(3);
  Context ctx = cpu_context(DType::f64);
  Tensor ids = Tensor::from_vector<int32_t>({1, 5}, {1, 7, 3, 22, 4});
  Tensor before = net.logits(ctx, ids);
  const std::vector<std::string> wrapped = model::attach_lora(net.params(), all_targets(2), 7, "r.yaml");
  const std::vector<std::string> want = {
      "backbone.layers.0.mixer.in_proj.weight",  "backbone.layers.0.mixer.out_proj.weight",
      "backbone.layers.1.mixer.q_proj.weight",   "backbone.layers.1.mixer.k_proj.weight",
      "backbone.layers.1.mixer.v_proj.weight",   "backbone.layers.1.mixer.o_proj.weight",
      "backbone.layers.2.mixer.up_proj.weight",  "backbone.layers.2.mixer.down_proj.weight",
      "backbone.layers.3.mixer.shared_experts.up_proj.weight",
      "backbone.layers.3.mixer.shared_experts.down_proj.weight"};
  EXPECT_EQ(wrapped, want);  // no routed expert, no router, no latent projection
  model::ParamStore& ps = net.params();
  const int64_t H = 16;
  EXPECT_EQ(ps.get("backbone.layers.0.mixer.in_proj.lora_A.weight").value.shape(), Shape({2, H}));
  EXPECT_EQ(ps.get("backbone.layers.0.mixer.in_proj.lora_B.weight").value.shape(),
            Shape({ps.get("backbone.layers.0.mixer.in_proj.weight").value.dim(0), 2}));
  int64_t adapters = 0;
  for (const model::Param* p : ps.all()) {
    EXPECT_EQ(p->requires_grad, model::is_lora(*p)) << p->name;
    EXPECT_EQ(p->grad.defined(), model::is_lora(*p)) << p->name;
    if (model::is_lora(*p)) adapters += p->value.numel();
  }
  EXPECT_EQ(ps.trainable_numel(), adapters);
  EXPECT_EQ(model::lora_param_count(hybrid_config("M*-E"), all_targets(2)), adapters);  // --dry-run's count
  EXPECT_TRUE(model::has_lora(ps));
  // A kaiming-uniform, B zero: the model computes what it computed before.
  const Tensor& a = ps.get("backbone.layers.1.mixer.q_proj.lora_A.weight").value;
  std::vector<double> av = a.to_f64_vector();
  EXPECT_GT(*std::max_element(av.begin(), av.end()), 0.0);
  EXPECT_LE(*std::max_element(av.begin(), av.end()), 1.0 / std::sqrt(16.0));
  EXPECT_EQ(max_diff(before, net.logits(ctx, ids)), 0.0);
}

// Under tensor parallelism an adapter follows its weight's split: B's rows with a column split
// (Mamba's in_proj block by block), A's columns with a row split, each registered with its global
// shape and offset; the whole factor's gradient is marked partial over the tensor group. What one
// tensor rank registers is the count --dry-run plans per GPU.
TEST(Lora, adapters_split_like_their_weights_on_a_tensor_rank) {
  model::ModelConfig cfg = hybrid_config("M*-E");
  cfg.vocab_size = 24;  // the head splits the vocabulary too
  for (const int rank : {0, 1}) {
    model::HybridModel net(cfg, host_backend(), DType::f64, model::ModelShard{0, 1, rank, 2});
    model::ParamStore& ps = net.params();
    model::attach_lora(ps, all_targets(2), 3, "test.yaml");
    const std::string q = "backbone.layers.1.mixer.q_proj.", o = "backbone.layers.1.mixer.o_proj.";
    const model::Param &qw = ps.get(q + "weight"), &qa = ps.get(q + "lora_A.weight"), &qb = ps.get(q + "lora_B.weight");
    EXPECT_FALSE(qa.tensor_split());
    EXPECT_TRUE(qa.shard.grad_partial_over_tensor);
    EXPECT_EQ(qb.value.shape(), Shape({qw.value.dim(0), 2}));
    EXPECT_EQ(qb.global_shape(), Shape({qw.global_shape()[0], 2}));
    EXPECT_EQ(qb.global_offset(), (std::vector<int64_t>{qw.global_offset()[0], 0}));
    EXPECT_FALSE(qb.shard.grad_partial_over_tensor);
    const model::Param &ow = ps.get(o + "weight"), &oa = ps.get(o + "lora_A.weight"), &ob = ps.get(o + "lora_B.weight");
    EXPECT_EQ(oa.value.shape(), Shape({2, ow.value.dim(1)}));
    EXPECT_EQ(oa.global_shape(), Shape({2, ow.global_shape()[1]}));
    EXPECT_EQ(oa.global_offset(), (std::vector<int64_t>{0, ow.global_offset()[1]}));
    EXPECT_FALSE(ob.tensor_split());
    EXPECT_TRUE(ob.shard.grad_partial_over_tensor);
    EXPECT_EQ(ow.lora->in_offset, rank * ow.value.dim(1));
    EXPECT_EQ(ow.lora->in_global, ow.global_shape()[1]);
    const model::Param& inw = ps.get("backbone.layers.0.mixer.in_proj.weight");
    const model::Param& inb = ps.get("backbone.layers.0.mixer.in_proj.lora_B.weight");
    ASSERT_EQ(inb.shard.row_blocks.size(), inw.shard.row_blocks.size());
    for (size_t i = 0; i < inw.shard.row_blocks.size(); ++i)
      EXPECT_EQ(inb.shard.row_blocks[i].global_row, inw.shard.row_blocks[i].global_row) << i;
    // A's values are one process's columns: kaiming-uniform keyed by the global index.
    model::HybridModel whole(cfg, host_backend(), DType::f64);
    model::attach_lora(whole.params(), all_targets(2), 3, "test.yaml");
    EXPECT_EQ(max_diff(oa.value, model::local_part(oa, whole.params().get(o + "lora_A.weight").value)), 0.0);
    int64_t adapters = 0;
    for (const model::Param* p : ps.all())
      if (model::is_lora(*p)) adapters += p->value.numel();
    EXPECT_EQ(model::lora_param_count(cfg, all_targets(2), 2), adapters);
  }
}

TEST(Lora, bad_targets_are_input_errors_naming_the_key) {
  auto attach = [](const std::string& pattern, std::vector<std::string> targets) {
    model::HybridModel net(hybrid_config(pattern), host_backend(), DType::f32);
    model::LoraConfig c;
    c.target_modules = std::move(targets);
    model::attach_lora(net.params(), c, 1, "r.yaml");
  };
  auto message = [&](const std::string& pattern, std::vector<std::string> targets) -> std::string {
    try {
      attach(pattern, std::move(targets));
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message("M*", {"linear_q"}).find("r.yaml: peft.target_modules: unknown module linear_q"), std::string::npos);
  EXPECT_NE(message("ME", {"experts"}).find("peft.target_modules: experts: the routed experts"), std::string::npos);
  EXPECT_NE(message("M-", {"in_proj", "linear_qkv"}).find("linear_qkv names no module of this model"),
            std::string::npos);
  EXPECT_EQ(message("M-", {"in_proj", "linear_fc2"}), "");
}

// W' = W + scale B A: the merged base alone gives base + adapter's logits.
TEST(Lora, merged_weights_give_the_logits_of_base_plus_adapter) {
  model::HybridModel net(hybrid_config("M*-E"), host_backend(), DType::f64);
  net.init(3);
  model::attach_lora(net.params(), all_targets(3), 7, "r.yaml");
  for (model::Param* p : net.params().all())
    if (model::is_lora(*p)) fill_uniform(p->value, Philox(11, model::name_stream(p->name)), -0.3, 0.3);
  Context ctx = cpu_context(DType::f64);
  Tensor ids = Tensor::from_vector<int32_t>({2, 4}, {1, 7, 3, 22, 4, 9, 0, 13});
  Tensor with_adapter = net.logits(ctx, ids);
  model::HybridModel base(hybrid_config("M*-E"), host_backend(), DType::f64);
  base.init(3);  // the same base weights, no adapter: the adapter matters
  EXPECT_GT(max_diff(with_adapter, base.logits(ctx, ids)), 1e-3);
  model::merge_lora(net.params());
  for (model::Param* p : net.params().all()) EXPECT_FALSE(p->lora) << p->name;
  // Only the merged base weights into a model without adapters.
  for (model::Param* p : base.params().all()) p->value.copy_from(net.params().get(p->name).value);
  EXPECT_LT(max_diff(with_adapter, base.logits(ctx, ids)), 1e-12);
}

// A model "M*-E" with every target wrapped, adapters filled with random values (B non-zero).
std::unique_ptr<model::HybridModel> model_with_adapters(double dropout) {
  auto net = std::make_unique<model::HybridModel>(hybrid_config("M*-E"), host_backend(), DType::f64);
  net->init(3);
  model::LoraConfig c = all_targets(3);
  c.dropout = dropout;
  model::attach_lora(net->params(), c, 7, "r.yaml");
  for (model::Param* p : net->params().all())
    if (model::is_lora(*p)) fill_uniform(p->value, Philox(11, model::name_stream(p->name)), -0.3, 0.3);
  return net;
}

TEST(Lora, dropout_acts_in_training_only_and_follows_its_key) {
  auto dropped = model_with_adapters(0.5), plain = model_with_adapters(0.0);
  Context ctx = cpu_context(DType::f64);
  Tensor ids = Tensor::from_vector<int32_t>({2, 4}, {1, 7, 3, 22, 4, 9, 0, 13});
  const Tensor eval = plain->logits(ctx, ids);
  // Evaluation and generation (no training key): dropout changes nothing.
  EXPECT_EQ(max_diff(dropped->logits(ctx, ids), eval), 0.0);
  ctx.dropout = {true, 1234, 5, 0};
  // p = 0 in training: exactly the computation without dropout.
  EXPECT_EQ(max_diff(plain->logits(ctx, ids), eval), 0.0);
  // p > 0 in training: adapter inputs dropped, the same mask for the same key, another for another.
  const Tensor train = dropped->logits(ctx, ids);
  EXPECT_GT(max_diff(train, eval), 1e-6);
  EXPECT_EQ(max_diff(dropped->logits(ctx, ids), train), 0.0);
  ctx.dropout.micro = 1;
  EXPECT_GT(max_diff(dropped->logits(ctx, ids), train), 1e-6);
  ctx.dropout = {true, 1234, 6, 0};
  EXPECT_GT(max_diff(dropped->logits(ctx, ids), train), 1e-6);
}

// Linear's backward without the forward's h (LinearSaved) recomputes it with the same mask: the
// gradients equal those of the backward that reuses h.
TEST(Lora, backward_recomputing_h_draws_the_forwards_mask) {
  model::ParamStore store(host_backend(), DType::f64);
  model::Linear lin(store, "backbone.layers.0.mixer.o_proj.", 6, 5, false);
  lin.init(1, 0.5);
  model::LoraConfig c;
  c.target_modules = {"linear_proj"};
  c.dim = 2;
  c.dropout = 0.5;
  model::attach_lora(store, c, 3, "r.yaml");
  for (model::Param* p : store.all())
    if (model::is_lora(*p)) fill_uniform(p->value, Philox(2, model::name_stream(p->name)), -0.5, 0.5);
  Context ctx = cpu_context(DType::f64);
  ctx.dropout = {true, 9, 1, 0};
  Tensor x = Tensor::empty({4, 6}, DType::f64), dy = Tensor::empty({4, 5}, DType::f64);
  fill_uniform(x, Philox(5), -1, 1);
  fill_uniform(dy, Philox(6), -1, 1);
  auto grads = [&](bool reuse) {
    store.zero_grads();
    model::LinearSaved kept;
    lin.forward(ctx, x, reuse ? &kept : nullptr);
    Tensor dx = Tensor::empty({4, 6}, DType::f64);
    lin.backward(ctx, x, dy, &dx, false, reuse ? &kept : nullptr);
    std::vector<Tensor> g{dx};
    for (model::Param* p : store.all())
      if (p->requires_grad) g.push_back(p->grad.clone());
    return g;
  };
  const std::vector<Tensor> reused = grads(true), recomputed = grads(false);
  ASSERT_EQ(reused.size(), 3u);  // dx, dA, dB
  for (size_t i = 0; i < reused.size(); ++i) EXPECT_LT(max_diff(reused[i], recomputed[i]), 1e-14) << i;
}

// Counts the GEMM ops a forward + backward issues.
struct GemmCounter : OpProfiler {
  int64_t gemms = 0;
  void begin(Context&, OpPhase phase, const char*) override { gemms += phase == OpPhase::gemm; }
  void end(Context&) override {}
};

int64_t mamba_step_gemms(bool adapters) {
  model::ParamStore store(host_backend(), DType::f64);
  model::Mamba2Mixer mixer(mamba_config(8, 4, 3, 2, 5, 4, 4, true, false), store, kMambaPrefix, 0);
  mixer.init(1);
  if (adapters) {
    model::LoraConfig c;
    c.target_modules = {"in_proj", "out_proj"};
    c.dim = 2;
    model::attach_lora(store, c, 3, "r.yaml");
  }
  Context ctx = cpu_context(DType::f64);
  GemmCounter counter;
  ctx.profiler = &counter;
  Tensor u = Tensor::empty({2, 7, 8}, DType::f64);
  fill_uniform(u, Philox(4), -1, 1);
  std::unique_ptr<model::MixerSaved> saved;
  Tensor out = mixer.forward(ctx, u, &saved);
  mixer.backward(ctx, *saved, out);
  return counter.gemms;
}

// The adapter's r-wide h = x A^T is computed once per projection and kept for the backward, also
// for in_proj's five row blocks (z, x, B, C, dt): in_proj adds 1 + 5 GEMMs forward (h, then h B_i^T
// per block) and 5 + 5 + 1 + 1 backward (dB_i, dh += dy_i B_i, dA, dx), out_proj 2 + 4. Computing
// h per block and again in the backward cost 42 instead of these 24. Less 1: without an adapter,
// out_proj's backward is two GEMM calls (dx, then dW once the gated norm's backward has written
// its input; model/mamba2_mixer.cpp), with one the single call of before.
TEST(Lora, adapters_compute_h_once_per_projection) {
  EXPECT_EQ(mamba_step_gemms(true) - mamba_step_gemms(false), (1 + 5) + (5 + 5 + 1 + 1) + (2 + 4) - 1);
}

}  // namespace
}  // namespace nemotron::testing
