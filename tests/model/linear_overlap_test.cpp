// Linear's two hooks for the tensor-parallel overlap (model/layer_stack.cpp): deferred weight
// gradients (ctx.deferred_weight_grads) give the immediate backward's dx now and, once run, its dW
// and db to the bit; the output projection's row chunks (ctx.on_output_rows) make the forward's
// y to the bit, each chunk handed over once, in order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "harness.h"
#include "model/linear.h"

namespace nemotron::testing {
namespace {

double max_diff(const Tensor& a, const Tensor& b) {
  std::vector<double> x = a.to_f64_vector(), y = b.to_f64_vector();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::fabs(x[i] - y[i]));
  return d;
}

Tensor uniform(Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(shape), DType::f32);
  fill_uniform(t, Philox(seed), -1, 1);
  return t;
}

// dx, dW, db of one backward over two row blocks of W (Mamba's in_proj shape), after an earlier
// backward already accumulated into dW and db.
struct Grads {
  Tensor dx, dw, db;
};

Grads backward_twice(bool defer) {
  model::ParamStore store(host_backend(), DType::f32);
  model::Linear lin(store, "backbone.layers.0.mixer.in_proj.", 16, 24, true);
  lin.init(1, 0.5);
  Context ctx = cpu_context(DType::f32);
  Tensor x = uniform({37, 16}, 2), dy0 = uniform({37, 10}, 3), dy1 = uniform({37, 14}, 4);
  Tensor dx = Tensor::empty({37, 16}, DType::f32);
  lin.backward(ctx, x, uniform({37, 24}, 5), &dx);  // gradients to accumulate onto
  std::vector<std::function<void(Context&)>> later;
  if (defer) ctx.deferred_weight_grads = &later;
  const Tensor before = lin.weight().grad.clone();
  const model::RowBlock blocks[2] = {{0, 10}, {10, 24}};
  const Tensor dys[2] = {dy0, dy1};
  lin.backward_rows(ctx, x, blocks, dys, &dx);
  if (defer) {
    EXPECT_EQ(later.size(), 2u);  // one dW GEMM per block, not yet run
    EXPECT_EQ(max_diff(lin.weight().grad, before), 0.0);
    ctx.deferred_weight_grads = nullptr;
    for (auto& grad : later) grad(ctx);
  }
  return {dx, lin.weight().grad.clone(), lin.bias()->grad.clone()};
}

TEST(LinearOverlap, deferred_weight_gradients_equal_the_immediate_ones_bitwise) {
  const Grads now = backward_twice(false), later = backward_twice(true);
  EXPECT_GT(max_diff(now.dw, Tensor::zeros({24, 16}, DType::f32)), 0.1);
  EXPECT_EQ(max_diff(now.dx, later.dx), 0.0);
  EXPECT_EQ(max_diff(now.dw, later.dw), 0.0);
  EXPECT_EQ(max_diff(now.db, later.db), 0.0);
}

TEST(LinearOverlap, output_row_chunks_make_the_forward_bitwise_each_handed_over_once) {
  model::ParamStore store(host_backend(), DType::f32);
  // A row split of tensor rank 0 of 2 (so it adds the bias): the output projection's shape.
  model::Linear lin(store, "backbone.layers.0.mixer.o_proj.", 16, 8, true);
  lin.init(1, 0.5);
  fill_uniform(lin.bias()->value, Philox(7), -1, 1);
  Context ctx = cpu_context(DType::f32);
  Tensor x = uniform({2, 2048, 16}, 6);
  const Tensor whole = lin.forward(ctx, x);
  std::vector<std::pair<int64_t, double>> seen;  // rows and first value of each chunk handed over
  const std::function<void(Tensor&)> hook = [&](Tensor& rows) {
    seen.emplace_back(rows.dim(0), rows.to_f64_vector()[0]);
  };
  EXPECT_EQ(max_diff(lin.forward_output(ctx, x), whole), 0.0);
  EXPECT_TRUE(seen.empty());  // no hook: one forward
  ctx.on_output_rows = &hook;
  const Tensor chunked = lin.forward_output(ctx, x);
  EXPECT_EQ(chunked.shape(), whole.shape());
  EXPECT_EQ(max_diff(chunked, whole), 0.0);
  ASSERT_EQ(seen.size(), 4u);
  const std::vector<double> w = whole.to_f64_vector();
  for (size_t c = 0; c < seen.size(); ++c) {
    EXPECT_EQ(seen[c].first, 1024);
    EXPECT_EQ(seen[c].second, w[c * 1024 * 8]);
  }
  // Too few rows to chunk: one forward, nothing handed over (the caller reduces the whole).
  seen.clear();
  Tensor small = uniform({3, 100, 16}, 8);
  EXPECT_EQ(max_diff(lin.forward_output(ctx, small), lin.forward(ctx, small)), 0.0);
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace nemotron::testing
