// ParamGather::copy_whole_to (train/param_gather.h) under `mpirun -np 2` and `-np 4`: with full
// parameter sharding no rank holds whole weights, and GRPO's engine (and its reference policy)
// get a whole copy gathered layer by layer from the ranks' slices. Every parameter's initial value
// is a function of (seed, name, index), so a model initialised alone is the reference: the copy
// must equal it bit for bit, in float32 and in bf16 (with float32 masters), on a model with
// Mamba, attention, MLP and MoE layers (the MoE's frozen correction bias outside the buffers);
// and again once the slots hold the last two layers. (After
// an update: cli.data_parallel's GRPO under FSDP, whose second step's rollouts equal one
// process's.) Only non-fatal EXPECTs.
#include <gtest/gtest.h>

#include "mpi_gtest_main.h"

#include "model/block_configs.h"
#include "model/hybrid_model.h"
#include "parallel/mpi_communicator.h"
#include "train/param_gather.h"

namespace nemotron::train {
namespace {

parallel::MpiCommunicator& world() {
  static parallel::MpiCommunicator w(MPI_COMM_WORLD);
  return w;
}

void expect_same_values(model::HybridModel& got, model::HybridModel& want, const char* when) {
  EXPECT_EQ(got.params().all().size(), want.params().all().size());
  for (const model::Param* p : want.params().all())
    EXPECT_EQ(got.params().get(p->name).value.to_f64_vector(), p->value.to_f64_vector()) << p->name << " " << when;
}

void check(DType dt) {
  const model::ModelConfig cfg = testing::hybrid_config("M*-E");
  const int R = world().size();
  model::HybridModel net(cfg, host_backend(), dt), want(cfg, host_backend(), dt);
  net.init(5), want.init(5);
  if (dt == DType::bf16) net.params().create_masters(), want.params().create_masters();
  AdamW opt(net.params(), AdamWConfig{}, &world(), nullptr, nullptr, kDefaultGradBucketElements, Fsdp::grads_params);
  ParamGather gather(net, opt, world());
  EXPECT_TRUE(opt.shards_values());

  model::HybridModel copy(cfg, host_backend(), dt, {}, /*trainable=*/false);
  const int64_t bytes = gather.copy_whole_to(copy.params());
  // Every trunk layer's weights gathered once: their bytes, to the padding of each parameter to 64 R.
  int64_t trunk_bytes = 0, trunk_params = 0;
  for (const model::Param* p : want.params().all())
    if (p->trunk_layer >= 0 && p->requires_grad)
      trunk_bytes += p->value.numel() * static_cast<int64_t>(dtype_size(dt)), ++trunk_params;
  EXPECT_GE(bytes, trunk_bytes);
  EXPECT_LE(bytes, trunk_bytes + trunk_params * 64 * R * static_cast<int64_t>(dtype_size(dt)));
  expect_same_values(copy, want, "(first copy)");

  // Again, with the slots holding the last two layers (a forward's order gathers every layer anew).
  model::HybridModel again(cfg, host_backend(), dt, {}, /*trainable=*/false);
  EXPECT_EQ(gather.copy_whole_to(again.params()), bytes);
  expect_same_values(again, want, "(second copy)");
}

TEST(ParamGather, whole_copy_equals_the_unsharded_weights_in_float32) { check(DType::f32); }
TEST(ParamGather, whole_copy_equals_the_unsharded_weights_in_bf16) { check(DType::bf16); }

}  // namespace
}  // namespace nemotron::train

int main(int argc, char** argv) { return nemotron::testing::run_mpi_gtests(argc, argv); }
