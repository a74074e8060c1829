// The op-phase scopes (core/op_profiler.h) seen by a fake profiler on the CPU: a whole hybrid
// step reports every phase its layers use, ops nested in ops count once to the outermost phase,
// begin/end always pair (also when an op throws), and GEMM FLOPs are counted once per product.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "core/op_profiler.h"
#include "core/rng.h"
#include "model/block_configs.h"  // tests/model
#include "model/hybrid_model.h"
#include "train/train_step.h"
#include "ops/adamw.h"
#include "ops/grouped_matmul.h"
#include "ops/matmul.h"

namespace nemotron {
namespace {

// Counts outermost scopes per phase and fails on any begin without its end (or the reverse).
struct CountingProfiler final : OpProfiler {
  std::map<OpPhase, int> begins;
  int ends = 0;
  bool open = false;
  bool nested_begin = false, stray_end = false;
  void begin(Context&, OpPhase phase, const char*) override {
    nested_begin |= open || open_scopes != 0;
    open = true;
    ++begins[phase];
  }
  void end(Context&) override {
    stray_end |= !open;
    open = false;
    ++ends;
  }
  int total_begins() const {
    int n = 0;
    for (const auto& [p, c] : begins) n += c;
    return n;
  }
};

void expect_balanced(const CountingProfiler& p) {
  EXPECT_FALSE(p.nested_begin) << "begin reached the profiler inside an open scope";
  EXPECT_FALSE(p.stray_end) << "end without begin";
  EXPECT_FALSE(p.open) << "a scope was left open";
  EXPECT_EQ(p.open_scopes, 0);
  EXPECT_EQ(p.total_begins(), p.ends);
}

Tensor random(Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  fill_uniform(t, Philox(seed), -1.0, 1.0);
  return t;
}

// Every layer kind at toy sizes (the hybrid block cases' config).
model::ModelConfig all_kinds_config() {
  model::ModelConfig c = testing::hybrid_config("M*-E");
  c.vocab_size = 29;  // the token ids below go up to 28
  return c;
}

TEST(OpProfiler, hybrid_step_reports_every_phase_balanced) {
  model::HybridModel net(all_kinds_config(), host_backend(), DType::f32);
  net.init(7);
  const int64_t B = 2, T = 9;
  std::vector<int32_t> ids(B * T), labels(B * T);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % 29);
  for (size_t i = 0; i < ids.size(); ++i) labels[i] = (i + 1) % T == 0 ? -100 : ids[(i + 1) % ids.size()];
  model::Batch batch{Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, labels), {}};

  CountingProfiler prof;
  Context ctx{&host_backend(), nullptr, DType::f32};
  ctx.profiler = &prof;
  net.params().zero_grads();
  train::cross_entropy_backward(ctx, net, batch, 1.0 / static_cast<double>(B * T));
  std::vector<ops::AdamWParam> ps;
  std::vector<Tensor> moments;
  for (model::Param* p : net.params().all()) {
    if (!p->requires_grad) continue;
    moments.push_back(Tensor::zeros(p->value.shape(), DType::f32));
    moments.push_back(Tensor::zeros(p->value.shape(), DType::f32));
    ps.push_back({p->value, Tensor(), p->grad, moments[moments.size() - 2], moments.back(), p->weight_decay});
  }
  ops::AdamWTensors list(std::move(ps));
  EXPECT_GT(ops::grad_norm(ctx, list), 0.0);
  ops::adamw_update(ctx, list, {1e-3, 0.9, 0.95, 1e-8, 0.1, 1});

  for (OpPhase p : all_op_phases()) EXPECT_GT(prof.begins[p], 0) << "no scope for phase " << op_phase_name(p);
  // One attention and one Mamba layer: their kernels run once forward and once backward.
  EXPECT_EQ(prof.begins[OpPhase::attention], 2);
  EXPECT_EQ(prof.begins[OpPhase::ssd_scan], 2);
  EXPECT_EQ(prof.begins[OpPhase::loss], 1);
  EXPECT_EQ(prof.begins[OpPhase::optimizer], 2);
  EXPECT_GT(prof.gemm_flops, 0.0);
  expect_balanced(prof);
}

TEST(OpProfiler, nested_ops_count_once_to_the_outermost_phase) {
  CountingProfiler prof;
  Context ctx{&host_backend(), nullptr, DType::f32};
  ctx.profiler = &prof;
  // grouped_linear runs one matmul per expert on the CPU; linear with a bias adds it through
  // ops::bias_add (elementwise on its own): each is one gemm scope.
  const int64_t S = 7, in = 5, out = 3;
  Tensor x = random({S, in}, 1), y = Tensor::empty({S, out}, DType::f32);
  std::vector<Tensor> w{random({out, in}, 2), random({out, in}, 3), random({out, in}, 4)};
  ops::grouped_linear_forward(ctx, x, {0, 3, 3, 7}, w, y);
  Tensor bias = random({out}, 5);
  ops::linear_forward(ctx, x, w[0], y, &bias);
  EXPECT_EQ(prof.begins[OpPhase::gemm], 2);
  EXPECT_EQ(prof.begins.count(OpPhase::elementwise), 0u) << "bias_add inside linear counted on its own";
  // Every product counted once: the grouped one over its rows, then the linear.
  EXPECT_DOUBLE_EQ(prof.gemm_flops, 2.0 * S * in * out + 2.0 * S * in * out);
  expect_balanced(prof);
}

TEST(OpProfiler, scopes_close_when_an_op_throws) {
  CountingProfiler prof;
  Context ctx{&host_backend(), nullptr, DType::f32};
  ctx.profiler = &prof;
  Tensor a = random({4, 5}, 1), b = random({6, 3}, 2), c = Tensor::empty({4, 3}, DType::f32);
  EXPECT_ANY_THROW(ops::matmul(ctx, a, false, b, false, c));  // K mismatch: 5 vs 6
  EXPECT_EQ(prof.begins[OpPhase::gemm], 1);
  expect_balanced(prof);
}

TEST(OpProfiler, off_means_no_calls) {
  CountingProfiler prof;
  Context ctx{&host_backend(), nullptr, DType::f32};  // profiler left null
  Tensor a = random({4, 5}, 1), b = random({5, 3}, 2), c = Tensor::empty({4, 3}, DType::f32);
  ops::matmul(ctx, a, false, b, false, c);
  EXPECT_EQ(prof.total_begins(), 0);
  EXPECT_EQ(prof.gemm_flops, 0.0);
}

}  // namespace
}  // namespace nemotron
