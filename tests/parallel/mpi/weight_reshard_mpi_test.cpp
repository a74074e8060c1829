// model::reshard_values under `mpirun -np 2` and `-np 4`: a generator split otherwise than its
// trainer gets exactly the values the trainer's layout holds. Every parameter's initial value is
// a function of (seed, name, global index) only, so a model built and initialised at any layout
// is the reference for every other: the world's TP parts gathered into a whole model, a whole
// model cut into TP parts, and TP parts moved to the same TP layout, bit for bit in float32 and
// bf16, on a model with every split kind (Mamba's in_proj and conv1d row blocks, attention's
// column and row splits, the MLP, experts cut by width, the vocabulary); on the host over MPI,
// and (a CUDA build with a GPU per rank) on the GPUs over NCCL. Only non-fatal EXPECTs.
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
  const int64_t bytes = reshard_values(ctx, split.params(), group, gathered.params());
  EXPECT_GT(bytes, 0);
  expect_same_values(gathered, whole);
  for (const Param* p : gathered.params().all()) EXPECT_FALSE(p->grad.defined()) << p->name;

  HybridModel cut(cfg, backend, dt, tp_shard(), /*trainable=*/false);
  EXPECT_EQ(reshard_values(ctx, whole.params(), self, cut.params()), 0);
  expect_same_values(cut, split);

  HybridModel same(cfg, backend, dt, tp_shard(), /*trainable=*/false);
  reshard_values(ctx, split.params(), group, same.params());
  expect_same_values(same, split);
}

TEST(ReshardValues, moves_every_split_exactly_in_float32) { check(DType::f32); }
TEST(ReshardValues, moves_every_split_exactly_in_bf16) { check(DType::bf16); }

TEST(ReshardValues, moves_every_split_exactly_on_gpus_over_nccl) {
#if NEMOTRON_CUDA
  if (cuda::device_count() < world()->size()) GTEST_SKIP() << "fewer GPUs than ranks";
  cuda::CudaBackend gpu(world()->rank());
  std::vector<int> everyone(static_cast<size_t>(world()->size()));
  for (int r = 0; r < world()->size(); ++r) everyone[static_cast<size_t>(r)] = r;
  parallel::NcclCommunicator nccl(world()->split(everyone), gpu);
  check(DType::bf16, gpu, nccl);
  check(DType::f32, gpu, nccl);
#else
  GTEST_SKIP() << "a build without CUDA";
#endif
}

}  // namespace
}  // namespace nemotron::model

int main(int argc, char** argv) { return nemotron::testing::run_mpi_gtests(argc, argv); }
