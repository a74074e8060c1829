// The MoE mixer under expert parallelism when some ranks' experts receive no rows, under
// `mpirun -np 2` and `-np 4` (the expert group is the world): every rank's tokens are pinned to
// experts 0 and 1 (force_selection), which rank 0 holds, so the other ranks run their expert
// GEMMs, relu2 and the backward on 0 rows. GRPO at EP 2 met this when sampling sent every row of
// a step elsewhere (an empty host tensor used to be undefined: relu2's output check aborted).
// Against the whole mixer on each rank (EP 1, the same init: initialisers are keyed by name):
// the outputs and input gradients equal in float64, an expert's gradient is the sum over the
// ranks of the whole mixers' gradients, and an idle rank's experts get zero gradients.
// Only non-fatal EXPECTs (a rank that returned early would leave the others waiting).
#include <gtest/gtest.h>

#include "mpi_gtest_main.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/block_configs.h"
#include "core/rng.h"
#include "model/moe_mixer.h"
#include "parallel/mpi_communicator.h"
#include "parallel/process_groups.h"

namespace nemotron::model {
namespace {

std::shared_ptr<parallel::MpiCommunicator> world() {
  static auto w = std::make_shared<parallel::MpiCommunicator>(MPI_COMM_WORLD);
  return w;
}

// Every group of one except the expert group, which is the world.
parallel::ProcessGroups expert_groups() {
  parallel::ProcessGroups g = *parallel::ProcessGroups::single();
  g.expert = world();
  g.world = world();
  g.world_rank = world()->rank();
  return g;
}

Tensor uniform(Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(std::move(shape), DType::f64);
  fill_uniform(t, Philox(seed), -1, 1);
  return t;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

int64_t experts() { return std::max(4, 2 * world()->size()); }  // two per rank at -np 2 and 4

// Every token goes to experts first_pinned and first_pinned + 1.
void check_pinned(int64_t first_pinned) {
  const int P = world()->size(), r = world()->rank();
  testing::MoeShape s = testing::kMoeLatent;  // shared expert and latent projections
  s.E = experts();
  s.K = 2;
  s.n_group = 1, s.topk_group = 1;
  const ModelConfig cfg = testing::moe_config(s);
  const parallel::ProcessGroups groups = expert_groups();
  Context ctx;
  ctx.groups = &groups;
  ctx.compute_dtype = DType::f64;

  ParamStore whole_store(host_backend(), DType::f64), ep_store(host_backend(), DType::f64);
  MoeMixer whole(cfg, whole_store, "", 1);
  MoeMixer ep(cfg, ep_store, "", 1, ModelShard{r, P, 0, 1, false});
  whole.init(4);
  ep.init(4);
  ASSERT_EQ(ep.local_experts(), s.E / P);

  const int64_t B = 2, T = 5, N = B * T;
  Tensor pinned = Tensor::empty({N, 2}, DType::i32);
  for (int64_t n = 0; n < N; ++n)
    pinned.data<int32_t>()[2 * n] = static_cast<int32_t>(first_pinned),
                                 pinned.data<int32_t>()[2 * n + 1] = static_cast<int32_t>(first_pinned + 1);
  whole.force_selection(pinned.clone());
  ep.force_selection(pinned.clone());

  const Tensor u = uniform({B, T, s.H}, 100 + static_cast<uint64_t>(r));
  const Tensor dy = uniform({B, T, s.H}, 200 + static_cast<uint64_t>(r));
  std::unique_ptr<MixerSaved> whole_saved, ep_saved;
  const std::vector<double> y_whole = whole.forward(ctx, u, &whole_saved).to_f64_vector();
  const std::vector<double> y_ep = ep.forward(ctx, u, &ep_saved).to_f64_vector();
  EXPECT_LT(max_abs_diff(y_ep, y_whole), 1e-13) << "rank " << r;
  const std::vector<double> dx_whole = whole.backward(ctx, *whole_saved, dy).to_f64_vector();
  const std::vector<double> dx_ep = ep.backward(ctx, *ep_saved, dy).to_f64_vector();
  EXPECT_LT(max_abs_diff(dx_ep, dx_whole), 1e-13) << "rank " << r;

  for (int64_t e = 0; e < s.E; ++e)
    for (const char* w : {"up_proj.weight", "down_proj.weight"}) {
      const std::string name = fmt::format("experts.{}.{}", e, w);
      Tensor summed = whole_store.get(name).grad.clone();
      world()->all_reduce(summed, parallel::ReduceOp::sum);  // collective: every rank, every expert
      const Param* mine = ep_store.find(name);
      if (mine == nullptr) continue;  // another rank's expert
      const std::vector<double> g = mine->grad.to_f64_vector();
      EXPECT_LT(max_abs_diff(g, summed.to_f64_vector()), 1e-13) << name << " on rank " << r;
      const bool pinned_here = e == first_pinned || e == first_pinned + 1;
      const double norm = std::sqrt(std::inner_product(g.begin(), g.end(), g.begin(), 0.0));
      if (pinned_here) EXPECT_GT(norm, 0) << name;
      else EXPECT_EQ(norm, 0) << name << ": an expert that received no rows has a gradient";
    }
}

TEST(MoeIdleExperts, ranks_whose_experts_receive_no_rows_run_forward_and_backward) {
  check_pinned(0);  // rank 0's experts take every row: the other ranks idle
}

TEST(MoeIdleExperts, the_first_rank_idles_too) {
  check_pinned(experts() - 2);  // the last rank's experts take every row
}

}  // namespace
}  // namespace nemotron::model

int main(int argc, char** argv) { return nemotron::testing::run_mpi_gtests(argc, argv); }
