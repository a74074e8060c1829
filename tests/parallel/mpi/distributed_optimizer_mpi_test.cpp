// The distributed optimizer (train/adamw.h) under `mpirun -np 2` and `-np 4`, on a bf16 store with
// float32 masters (the GPU's layout; the CPU CLI trains in float32 and has none): a sharded AdamW
// over the world against an unsharded one on the same weights, fed the sum of every rank's
// gradients. Gradients are small multiples of 2^-10, so their sums are exact in any order and the
// update must agree bit for bit; the gradient norm to float rounding. Also: the gathered state a
// checkpoint writes, masters unsharded for a load and sharded back, moments set from full
// tensors, a frozen `stat` parameter left alone. With one bucket (the default size) and with the
// smallest buckets (each bucket sharded over the ranks, train/grad_buckets.h). Only non-fatal
// EXPECTs (a rank that returned early would leave the others waiting in a collective).
#include <gtest/gtest.h>

#include "mpi_gtest_main.h"

#include "parallel/mpi_communicator.h"
#include "train/adamw.h"
#include "train/optimizer_bytes.h"

namespace nemotron::train {
namespace {

parallel::MpiCommunicator& world() {
  static parallel::MpiCommunicator w(MPI_COMM_WORLD);
  return w;
}

// Odd sizes so that ranges split parameters; a frozen float32 `stat` parameter as the MoE's bias.
void build(model::ParamStore& s) {
  s.add("a.weight", {37, 19}, true);
  s.add("a.bias", {19}, false);
  model::Param& bias = s.add("router.bias", {5}, false, /*stat=*/true);
  s.set_requires_grad(bias, false);
  s.add("b.weight", {130, 7}, true);
  s.add("c.norm", {3}, false);
  for (model::Param* p : s.all()) model::init_normal(*p, 7, 0.5);
  s.create_masters();
}

// Rank r's gradient of parameter k at step t: integers in [-8, 8] times 2^-10.
Tensor grad_of(const model::Param& p, size_t k, int rank, int t) {
  std::vector<double> v(static_cast<size_t>(p.value.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(
               static_cast<int>((i * 7 + k * 13 + static_cast<size_t>(rank) * 5 + static_cast<size_t>(t) * 3) % 17) - 8) /
           1024.0;
  return Tensor::from_vector<double>(p.value.shape(), v).to_host(DType::f32);
}

std::vector<double> values(const Tensor& t) { return t.to_f64_vector(); }

void expect_equal_to_unsharded(int64_t bucket_elements) {
  const int R = world().size(), me = world().rank();
  model::ParamStore sharded(host_backend(), DType::bf16), whole(host_backend(), DType::bf16);
  build(sharded);
  build(whole);
  const AdamWConfig cfg{0.9, 0.95, 1e-8, 0.1};
  AdamW a(sharded, cfg, &world(), nullptr, nullptr, bucket_elements), b(whole, cfg);
  EXPECT_TRUE(a.sharded());
  EXPECT_TRUE(a.shards_masters());
  EXPECT_FALSE(b.sharded());
  // Masters + moments: 1/R of the unsharded bytes, to the padding of the buffer to 64 R.
  EXPECT_EQ(a.state_bytes() * R, 3 * sharded.grad_buffer().numel() * 4);
  EXPECT_EQ(a.unsharded_state_bytes(), b.state_bytes());
  // The masters alone (GRPO's memory line): the parameters' own are gone into the shard, whose
  // pieces over the ranks hold every trainable parameter's once; unsharded, each parameter's.
  int64_t whole_masters = 0;
  for (const model::Param* p : whole.all())
    if (p->master.defined()) whole_masters += p->value.numel() * 4;
  EXPECT_GT(whole_masters, 0);
  EXPECT_EQ(held_master_bytes(whole, b), whole_masters);
  const int64_t mine = held_master_bytes(sharded, a);
  EXPECT_GT(mine, 0);
  EXPECT_EQ(static_cast<int64_t>(world().all_reduce_host(static_cast<double>(mine))), whole_masters);
  EXPECT_EQ(sharded.grad_buffer().numel() % (64 * R), 0);
  // The buckets cover the buffer once, each a multiple of 64 R, the rank's slices its S elements.
  int64_t covered = 0;
  for (const GradBucket& bk : a.shard_buckets()) {
    EXPECT_EQ((bk.end - bk.begin) % (64 * R), 0);
    EXPECT_EQ(bk.shard_at, covered / R);
    covered += bk.end - bk.begin;
  }
  EXPECT_EQ(covered, sharded.grad_buffer().numel());
  EXPECT_EQ(a.shard_grads().numel() * R, covered);
  if (bucket_elements == 1) {  // cut at every parameter start that is a multiple of 64 R
    EXPECT_GT(a.shard_buckets().size(), 1u);
  }
  for (const model::Param* p : sharded.all()) EXPECT_FALSE(p->master.defined()) << p->name;  // in the shard now
  // What GradReducer does for a sharded optimizer (it takes a HybridModel; this is a bare store):
  // each bucket reduce-scattered into the rank's slice of it.
  Tensor shard_grads = a.shard_grads();
  auto reduce_scatter = [&] {
    for (const GradBucket& bk : a.shard_buckets()) {
      Tensor mine = shard_grads.slice(bk.shard_at, bk.shard_at + (bk.end - bk.begin) / R);
      world().reduce_scatter(sharded.grad_buffer().slice(bk.begin, bk.end), mine, parallel::ReduceOp::sum);
    }
  };
  const auto& pa = sharded.all();
  const auto& pb = whole.all();
  for (int t = 0; t < 3; ++t) {
    sharded.zero_grads();
    whole.zero_grads();
    for (size_t k = 0; k < pa.size(); ++k) {
      if (!pa[k]->requires_grad) continue;
      pa[k]->grad.copy_from(grad_of(*pa[k], k, me, t));
      Tensor sum = Tensor::zeros(pb[k]->value.shape(), DType::f32);
      for (int r = 0; r < R; ++r) {
        std::vector<double> s = values(sum), g = values(grad_of(*pb[k], k, r, t));
        for (size_t i = 0; i < s.size(); ++i) s[i] += g[i];
        sum = Tensor::from_vector<double>(pb[k]->value.shape(), s).to_host(DType::f32);
      }
      pb[k]->grad.copy_from(sum);
    }
    reduce_scatter();
    const double na = a.clip_grad_norm(t == 2 ? 1e-3 : 0), nb = b.clip_grad_norm(t == 2 ? 1e-3 : 0);
    EXPECT_NEAR(na, nb, 1e-12 * nb) << "step " << t;
    a.step(1e-2);
    b.step(1e-2);
    for (size_t k = 0; k < pa.size(); ++k) {
      if (t < 2) {  // without clipping, bit for bit; the clip factor of step 3 differs in its last bits
        EXPECT_EQ(values(pa[k]->value), values(pb[k]->value)) << pa[k]->name << " step " << t;
      } else {
        const std::vector<double> x = values(pa[k]->value), y = values(pb[k]->value);
        for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-2 * std::abs(y[i]) + 1e-6) << pa[k]->name;
      }
    }
  }
  // The frozen stat parameter: untouched, float32, no state.
  EXPECT_EQ(values(sharded.get("router.bias").value), values(whole.get("router.bias").value));

  // What a checkpoint writes: full masters and moments on rank 0 only.
  for (int root : {0, R - 1}) {
    std::shared_ptr<const FullOptimizerState> st = a.gather_state(root);
    EXPECT_EQ(st != nullptr, me == root);
    if (!st) continue;
    for (size_t k = 0; k < pa.size(); ++k) {
      if (!pb[k]->requires_grad) {
        EXPECT_FALSE(st->exp_avg[k].defined());
        continue;
      }
      const std::vector<double> m = values(st->masters[k]), w = values(pb[k]->master);
      for (size_t i = 0; i < m.size(); ++i) EXPECT_NEAR(m[i], w[i], 1e-2 * std::abs(w[i]) + 1e-6) << pa[k]->name;
      EXPECT_EQ(st->exp_avg[k].shape(), pb[k]->value.shape());
      const std::vector<double> x = values(st->exp_avg_sq[k]), y = values(b.second_moments()[k]);
      for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5 * std::abs(y[i]) + 1e-12) << pa[k]->name;
    }
  }

  // The reference moves on alone (its state now differs from the shard's), then the sharded
  // optimizer loads it as from a checkpoint: full masters while the load writes them, each
  // rank's range taken back after, moments from full tensors, the step count.
  whole.zero_grads();
  for (size_t k = 0; k < pb.size(); ++k)
    if (pb[k]->requires_grad) pb[k]->grad.copy_from(grad_of(*pb[k], k, 0, 5));
  b.clip_grad_norm(0);
  b.step(3e-2);
  a.unshard_masters();
  for (size_t k = 0; k < pa.size(); ++k) {
    if (!pa[k]->requires_grad) continue;
    EXPECT_TRUE(pa[k]->master.defined());
    pa[k]->master.copy_from(pb[k]->master);
    pa[k]->refresh_value();
  }
  a.shard_masters();
  for (const model::Param* p : pa) EXPECT_FALSE(p->master.defined()) << p->name;
    for (size_t k = 0; k < pa.size(); ++k)
    if (pa[k]->requires_grad) a.set_moments(k, b.first_moments()[k], b.second_moments()[k]);
  a.set_steps_taken(b.steps_taken());
  // Now both hold the same state: one more unclipped step agrees bit for bit.
  sharded.zero_grads();
  whole.zero_grads();
  for (size_t k = 0; k < pa.size(); ++k) {
    if (!pa[k]->requires_grad) continue;
    pa[k]->grad.copy_from(grad_of(*pa[k], k, me, 9));
    Tensor sum = Tensor::zeros(pb[k]->value.shape(), DType::f32);
    for (int r = 0; r < R; ++r) {
      std::vector<double> s = values(sum), g = values(grad_of(*pb[k], k, r, 9));
      for (size_t i = 0; i < s.size(); ++i) s[i] += g[i];
      sum = Tensor::from_vector<double>(pb[k]->value.shape(), s).to_host(DType::f32);
    }
    pb[k]->grad.copy_from(sum);
  }
  reduce_scatter();
  a.clip_grad_norm(0);
  b.clip_grad_norm(0);
  a.step(1e-2);
  b.step(1e-2);
  for (size_t k = 0; k < pa.size(); ++k)
    EXPECT_EQ(values(pa[k]->value), values(pb[k]->value)) << pa[k]->name << " after the reload";
}

TEST(DistributedOptimizer, equals_unsharded_adamw_on_the_summed_gradients) {
  expect_equal_to_unsharded(kDefaultGradBucketElements);
}

TEST(DistributedOptimizer, equals_unsharded_adamw_with_the_smallest_buckets) { expect_equal_to_unsharded(1); }

}  // namespace
}  // namespace nemotron::train

int main(int argc, char** argv) { return nemotron::testing::run_mpi_gtests(argc, argv); }
