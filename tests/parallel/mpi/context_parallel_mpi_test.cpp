// Context parallelism's token-mixing pieces under `mpirun -np 2` and `-np 4` (the context group is
// the world): the attention and Mamba-2 mixers on each rank's two chunks of every row
// (model/context_split.h) against the same mixer on the whole rows in one process. Float64, so
// the outputs, input gradients and (summed over the ranks) parameter gradients must agree to
// rounding. Cases: packed rows whose sequences start inside a chunk and exactly at a chunk edge,
// RoPE at global positions with GQA, Mamba's conv halo and scan state across every chunk edge.
// Only non-fatal EXPECTs (a rank that returned early would leave the others in a collective).
#include <gtest/gtest.h>

#include "mpi_gtest_main.h"

#include <cmath>

#include "core/rng.h"
#include "model/attention_mixer.h"
#include "model/context_split.h"
#include "model/mamba2_mixer.h"
#include "parallel/mpi_communicator.h"
#include "parallel/process_groups.h"
#include "../../model/block_configs.h"

namespace nemotron::testing {
namespace {

Context cpu_context(DType dtype) {
  Context c;
  c.compute_dtype = dtype;
  return c;
}

// ||got - want|| / ||want||.
double relative_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to_f64_vector(), b = want.to_f64_vector();
  if (a.size() != b.size()) return 1e30;
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]), n += b[i] * b[i];
  return std::sqrt(d / std::max(n, 1e-300));
}

parallel::MpiCommunicator& world() {
  static parallel::MpiCommunicator w(MPI_COMM_WORLD);
  return w;
}

// Every rank a context rank: CP = world size.
std::shared_ptr<const parallel::ProcessGroups> context_groups() {
  static std::shared_ptr<const parallel::ProcessGroups> g = parallel::ProcessGroups::create(
      parallel::RankLayout({1, world().size(), 1, false}, world().size(), {}, "test"), &world(), nullptr);
  return g;
}

// This rank's chunks of a whole [B, T, ...] (model/context_split.h's layout).
Tensor mine(const Tensor& whole) {
  const int C = world().size(), r = world().rank();
  const model::ContextChunks c{C, r, whole.dim(1) / (2 * C)};
  std::vector<int64_t> d = whole.shape().dims();
  d[1] = 2 * c.L;
  Tensor out = Tensor::empty(Shape(d), whole.dtype());
  for (int j = 0; j < 2; ++j) model::copy_row_block(out, j * c.L, whole, c.chunk(j) * c.L, c.L);
  return out;
}

// Packed rows: row 0 one sequence; row 1 sequences starting at 3, at the edge of chunk 2 and at
// T - 2 (inside the last chunk). Positions restart with each sequence.
void packed_layout(int64_t B, int64_t T, int64_t L, Tensor* seq, Tensor* pos) {
  std::vector<int32_t> s(static_cast<size_t>(B * T)), p(s.size());
  for (int64_t b = 0; b < B; ++b) {
    int32_t id = 0, at = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (b % 2 == 1 && (t == 3 || t == 2 * L || t == T - 2)) ++id, at = 0;
      s[static_cast<size_t>(b * T + t)] = id;
      p[static_cast<size_t>(b * T + t)] = at++;
    }
  }
  *seq = Tensor::from_vector<int32_t>({B, T}, s);
  *pos = Tensor::from_vector<int32_t>({B, T}, p);
}

Tensor positions(int64_t B, int64_t T) {
  std::vector<int32_t> p(static_cast<size_t>(B * T));
  for (int64_t i = 0; i < B * T; ++i) p[static_cast<size_t>(i)] = static_cast<int32_t>(i % T);
  return Tensor::from_vector<int32_t>({B, T}, p);
}

template <class Make>
void expect_split_equals_whole(Make make, int64_t H, int64_t B, int64_t L, bool packed,
                               std::pair<double, double> (*range)(const std::string&)) {
  const int C = world().size();
  const int64_t T = 2 * C * L;
  model::ParamStore whole_store(host_backend(), DType::f64), split_store(host_backend(), DType::f64);
  auto whole = make(whole_store), split = make(split_store);
  for (model::ParamStore* s : {&whole_store, &split_store}) {
    int k = 0;
    for (model::Param* p : s->all()) {
      auto [lo, hi] = range(p->name);
      fill_uniform(p->value, Philox(11, static_cast<uint64_t>(k++)), lo, hi);
    }
    s->zero_grads();
  }
  Tensor u = Tensor::empty({B, T, H}, DType::f64), dout = Tensor::empty({B, T, H}, DType::f64);
  fill_uniform(u, Philox(12), -1, 1);
  fill_uniform(dout, Philox(13), -1, 1);
  model::SequenceLayout all;
  if (packed) packed_layout(B, T, L, &all.seq_idx, &all.position_ids);

  Context one = cpu_context(DType::f64);
  std::unique_ptr<model::MixerSaved> saved;
  const Tensor out = whole->forward(one, u, &saved, all);
  const Tensor du = whole->backward(one, *saved, dout);

  Context ctx = cpu_context(DType::f64);
  ctx.groups = context_groups().get();
  model::SequenceLayout part;
  part.position_ids = mine(packed ? all.position_ids : positions(B, T));
  if (packed) part.seq_idx = mine(all.seq_idx);
  part.context_split = true;
  std::unique_ptr<model::MixerSaved> saved_part;
  const Tensor out_part = split->forward(ctx, mine(u), &saved_part, part);
  const Tensor du_part = split->backward(ctx, *saved_part, mine(dout));

  EXPECT_LT(relative_error(out_part, mine(out)), 1e-12) << "output, rank " << world().rank();
  EXPECT_LT(relative_error(du_part, mine(du)), 1e-12) << "input gradient, rank " << world().rank();
  for (size_t i = 0; i < split_store.all().size(); ++i) {
    model::Param& p = *split_store.all()[i];
    if (!p.grad.defined()) continue;
    Tensor g = p.grad.clone();
    world().all_reduce(g, parallel::ReduceOp::sum);  // parameters are replicated over the context ranks: gradients summed
    EXPECT_LT(relative_error(g, whole_store.all()[i]->grad), 1e-11) << p.name << ", rank " << world().rank();
  }
}

std::pair<double, double> attention_range(const std::string&) { return {-0.5, 0.5}; }

TEST(ContextParallel, attention_equals_the_whole_rows) {
  for (bool rope : {false, true})
    for (bool packed : {false, true}) {
      const model::ModelConfig cfg = attention_config(12, 4, 2, 6, rope, false);
      auto make = [&](model::ParamStore& s) { return std::make_unique<model::AttentionMixer>(cfg, s, "a.", 1); };
      expect_split_equals_whole(make, 12, 2, 3, packed, attention_range);
    }
}

TEST(ContextParallel, mamba_equals_the_whole_rows) {
  for (bool packed : {false, true})
    for (int64_t chunk : {2, 16}) {  // the scan's own chunks shorter than and longer than a CP chunk
      const model::ModelConfig cfg = mamba_config(8, 4, 3, 2, 5, 4, chunk, true, false);
      auto make = [&](model::ParamStore& s) { return std::make_unique<model::Mamba2Mixer>(cfg, s, kMambaPrefix, 0); };
      expect_split_equals_whole(make, 8, 2, 4, packed, mamba_param_range);
    }
}

TEST(ContextParallel, gather_and_reduce_scatter_are_adjoint) {
  // <gather(x), y> = <x, reduce_scatter(y)> summed over the ranks, for every rank's own x and y.
  const int C = world().size(), r = world().rank();
  Context ctx = cpu_context(DType::f64);
  ctx.groups = context_groups().get();
  Tensor x = Tensor::empty({2, 6, 3}, DType::f64), y = Tensor::empty({2, 6 * C, 3}, DType::f64);
  fill_uniform(x, Philox(21, static_cast<uint64_t>(r)), -1, 1);
  fill_uniform(y, Philox(22, static_cast<uint64_t>(r)), -1, 1);
  const std::vector<double> gx = model::gather_context(ctx, x).to_f64_vector(), yv = y.to_f64_vector();
  const std::vector<double> sy = model::reduce_scatter_context(ctx, y).to_f64_vector(), xv = x.to_f64_vector();
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < gx.size(); ++i) lhs += gx[i] * yv[i];
  for (size_t i = 0; i < xv.size(); ++i) rhs += xv[i] * sy[i];
  lhs = world().all_reduce_host(lhs), rhs = world().all_reduce_host(rhs);
  EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::abs(lhs)));
  // Rank q's chunk 0 is global chunk q; its chunk 1 is global chunk 2C-1-q.
  const Tensor whole = model::gather_context(ctx, x);
  const Tensor back = model::local_context_rows(ctx, whole);
  EXPECT_EQ(back.to_f64_vector(), xv);
}

}  // namespace
}  // namespace nemotron::testing

int main(int argc, char** argv) { return nemotron::testing::run_mpi_gtests(argc, argv); }
