// model::reshard_values under `mpirun -np 2` and `-np 4`: a generator split otherwise than its
// trainer gets exactly the values the trainer's layout holds. Every parameter's initial value is
// a function of (seed, name, global index) only, so a model built and initialised at any layout
// is the reference for every other: the world's TP parts gathered into a whole model, a whole
// model cut into TP parts, and TP parts moved to the same TP layout, bit for bit in float32 and
// bf16, on a model with every split kind (Mamba's in_proj and conv1d row blocks, attention's
// column and row splits, the MLP, experts cut by width, the vocabulary); on the host over MPI,
// and (a CUDA build with a GPU per rank) on the GPUs over NCCL. Then the routed experts split
// over an expert group (expert parallelism): gathered whole, cut into blocks, moved to other
// ranks at the same size, and (np 4) an EP 2 x TP 2 mesh into whole, EP 4 and TP 4 models.
// Only non-fatal EXPECTs.
#include <gtest/gtest.h>

#include "mpi_gtest_main.h"

#include "model/block_configs.h"
#include "model/hybrid_model.h"
#include "model/weight_reshard.h"
#include "parallel/mpi_communicator.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#include "parallel/nccl_communicator.h"
#endif

namespace nemotron::model {
namespace {

std::shared_ptr<parallel::MpiCommunicator> world() {
  static auto w = std::make_shared<parallel::MpiCommunicator>(MPI_COMM_WORLD);
  return w;
}

ModelConfig config() {
  ModelConfig c = testing::hybrid_config("M*-E");
  c.num_key_value_heads = 4, c.n_groups = 4;  // so TP 4 divides them
  c.vocab_size = 24;
  c.moe_shared_expert_intermediate_size = 8;
  return c;
}

ModelShard tp_shard() { return {0, 1, world()->rank(), world()->size(), false}; }

// Every value equal, parameter by parameter (EXPECT_EQ on the values names the first mismatch).
void expect_same_values(HybridModel& got, HybridModel& want) {
  EXPECT_EQ(got.params().all().size(), want.params().all().size());
  for (const Param* p : want.params().all()) {
    const Param& q = got.params().get(p->name);
    EXPECT_EQ(q.value.to_f64_vector(), p->value.to_f64_vector()) << p->name;
  }
}

// `group`: the world, over MPI (host tensors) or NCCL (on `backend`).
void check(DType dt, Backend& backend = host_backend(), parallel::Communicator& group = *world()) {
  const ModelConfig cfg = config();
  parallel::SelfCommunicator self;
  Context ctx{&backend, nullptr, dt};
  HybridModel whole(cfg, backend, dt);
  whole.init(5);
  HybridModel split(cfg, backend, dt, tp_shard());
  split.init(5);
  int split_params = 0;
  for (const Param* p : split.params().all()) split_params += p->tensor_split();
  EXPECT_GT(split_params, 10);

  HybridModel gathered(cfg, backend, dt, {}, /*trainable=*/false);
  const int64_t bytes = reshard_values(ctx, {split.params(), group}, gathered.params());
  EXPECT_GT(bytes, 0);
  expect_same_values(gathered, whole);
  for (const Param* p : gathered.params().all()) EXPECT_FALSE(p->grad.defined()) << p->name;

  HybridModel cut(cfg, backend, dt, tp_shard(), /*trainable=*/false);
  EXPECT_EQ(reshard_values(ctx, {whole.params(), self}, cut.params()), 0);
  expect_same_values(cut, split);

  HybridModel same(cfg, backend, dt, tp_shard(), /*trainable=*/false);
  reshard_values(ctx, {split.params(), group}, same.params());
  expect_same_values(same, split);
}

// The world as an expert group (EP = world size, TP 1). `group`: as for check().
void check_experts(DType dt, Backend& backend = host_backend(), parallel::Communicator& group = *world()) {
  const ModelConfig cfg = config();
  const int R = group.size(), me = group.rank();
  const int64_t E = cfg.n_routed_experts;
  ASSERT_EQ(E % R, 0);
  parallel::SelfCommunicator self;
  Context ctx{&backend, nullptr, dt};
  HybridModel whole(cfg, backend, dt);
  whole.init(5);
  HybridModel split(cfg, backend, dt, ModelShard{me, R, 0, 1, false});
  split.init(5);
  EXPECT_LT(split.params().all().size(), whole.params().all().size());  // each rank holds E / R experts

  // EP R -> 1: every expert all-gathered over the expert group.
  HybridModel gathered(cfg, backend, dt, {}, /*trainable=*/false);
  EXPECT_GT(reshard_values(ctx, {split.params(), self, &group, E}, gathered.params()), 0);
  expect_same_values(gathered, whole);

  // EP 1 -> R: each rank keeps its block of the whole set; nothing moves.
  HybridModel cut(cfg, backend, dt, ModelShard{me, R, 0, 1, false}, /*trainable=*/false);
  EXPECT_EQ(reshard_values(ctx, {whole.params(), self}, cut.params()), 0);
  expect_same_values(cut, split);

  // EP R -> R with the blocks on other ranks (rank r's generator holds block R - 1 - r).
  const ModelShard mirror{R - 1 - me, R, 0, 1, false};
  HybridModel want(cfg, backend, dt, mirror);
  want.init(5);
  HybridModel mirrored(cfg, backend, dt, mirror, /*trainable=*/false);
  reshard_values(ctx, {split.params(), self, &group, E}, mirrored.params());
  expect_same_values(mirrored, want);
  // Without the expert group the experts held elsewhere cannot be filled: refused, not left stale.
  HybridModel stale(cfg, backend, dt, mirror, /*trainable=*/false);
  EXPECT_ANY_THROW(reshard_values(ctx, {split.params(), self}, stale.params()));
}

TEST(ReshardValues, moves_every_split_exactly_in_float32) { check(DType::f32); }
TEST(ReshardValues, moves_every_split_exactly_in_bf16) { check(DType::bf16); }

TEST(ReshardValues, moves_routed_experts_exactly_in_float32) { check_experts(DType::f32); }
TEST(ReshardValues, moves_routed_experts_exactly_in_bf16) { check_experts(DType::bf16); }

// np 4 as an EP 2 x TP 2 mesh (tensor ranks adjacent, as parallel::RankLayout places them: rank
// = tp + 2 ep) into a whole model, EP 4 (TP 1) and TP 4 (EP 1).
TEST(ReshardValues, moves_an_expert_and_tensor_mesh_exactly) {
  if (world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  const int me = world()->rank(), tp = me % 2, ep = me / 2;
  const auto tensor = world()->split({2 * ep, 2 * ep + 1});
  const auto expert = world()->split({tp, tp + 2});
  const ModelConfig cfg = config();
  const int64_t E = cfg.n_routed_experts;
  Backend& backend = host_backend();
  Context ctx{&backend, nullptr, DType::f32};
  HybridModel mesh(cfg, backend, DType::f32, ModelShard{ep, 2, tp, 2, false});
  mesh.init(5);
  for (const ModelShard& to : {ModelShard{}, ModelShard{me, 4, 0, 1, false}, ModelShard{0, 1, me, 4, false}}) {
    HybridModel want(cfg, backend, DType::f32, to);
    want.init(5);
    SCOPED_TRACE(::testing::Message() << "to EP " << to.expert_size << " x TP " << to.tensor_size);
    HybridModel got(cfg, backend, DType::f32, to, /*trainable=*/false);
    EXPECT_GT(reshard_values(ctx, {mesh.params(), *tensor, expert.get(), E}, got.params()), 0);
    expect_same_values(got, want);
  }
}

TEST(ReshardValues, moves_every_split_exactly_on_gpus_over_nccl) {
#if NEMOTRON_CUDA
  if (cuda::device_count() < world()->size()) GTEST_SKIP() << "fewer GPUs than ranks";
  cuda::CudaBackend gpu(world()->rank());
  std::vector<int> everyone(static_cast<size_t>(world()->size()));
  for (int r = 0; r < world()->size(); ++r) everyone[static_cast<size_t>(r)] = r;
  parallel::NcclCommunicator nccl(world()->split(everyone), gpu);
  check(DType::bf16, gpu, nccl);
  check(DType::f32, gpu, nccl);
  check_experts(DType::bf16, gpu, nccl);
#else
  GTEST_SKIP() << "a build without CUDA";
#endif
}

}  // namespace
}  // namespace nemotron::model

int main(int argc, char** argv) { return nemotron::testing::run_mpi_gtests(argc, argv); }
