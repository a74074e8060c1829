// ParamGather::copy_whole_to (train/param_gather.h) under `mpirun -np 2` and `-np 4`: with full
// parameter sharding no rank holds whole weights, and GRPO's engine (and its reference policy)
// get a whole copy gathered layer by layer from the ranks' slices. Every parameter's initial value
// is a function of (seed, name, index), so a model initialised alone is the reference: the copy
// must equal it bit for bit, in float32 and in bf16 (with float32 masters), on a model with
// Mamba, attention, MLP and MoE layers (the MoE's frozen correction bias outside the buffers);
// and again once the slots hold the last two layers. (After
// an update: cli.data_parallel's GRPO under FSDP, whose second step's rollouts equal one
// process's.) Only non-fatal EXPECTs.
// Start-up without whole masters: a bf16 model whose masters are deferred (ParamStore::
// defer_masters) holds, under the distributed optimizer and both FSDP strategies, the slices of
// the masters create_masters() would give, and a load through ShardWeightSink (each rank writes
// only what it keeps) leaves masters and values equal to a one-process load's.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "mpi_gtest_main.h"

#include "model/block_configs.h"
#include "model/hybrid_model.h"
#include "model/weights_io.h"
#include "parallel/mpi_communicator.h"
#include "train/checkpoint.h"
#include "train/param_gather.h"
#include "train/shard_weight_sink.h"

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

// The float32 masters `opt` shards, gathered whole on every rank's host, against `want`'s.
void expect_same_masters(const AdamW& opt, model::HybridModel& got, model::HybridModel& want, const std::string& when) {
  for (int root = 0; root < world().size(); ++root) {  // collective: every rank checks in turn
    const std::shared_ptr<const FullOptimizerState> st = opt.gather_state(root);
    if (root != world().rank()) continue;
    ASSERT_TRUE(st);
    const auto& all = got.params().all();
    for (size_t k = 0; k < all.size(); ++k) {
      const model::Param& w = want.params().get(all[k]->name);
      if (!w.master.defined()) continue;
      ASSERT_TRUE(st->masters[k].defined()) << all[k]->name << " " << when;
      EXPECT_EQ(st->masters[k].to_f64_vector(), w.master.to_f64_vector()) << all[k]->name << " " << when;
    }
  }
}

void check_deferred_masters_and_load(Fsdp fsdp) {
  const model::ModelConfig cfg = testing::hybrid_config("M*-E");
  const int R = world().size();
  const std::string dir = ::testing::TempDir() + "nemotron_param_gather_mpi_np" + std::to_string(R) + "_" +
                          std::to_string(static_cast<int>(fsdp));
  if (world().rank() == 0) {  // a checkpoint of other weights (another seed), float32 masters
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    model::HybridModel src(cfg, host_backend(), DType::bf16);
    src.init(9);
    src.params().create_masters();
    model::save_weights(dir, src.params());
  }
  world().barrier();

  model::HybridModel net(cfg, host_backend(), DType::bf16, {}, true, /*defer_grads=*/fsdp != Fsdp::off);
  model::HybridModel init(cfg, host_backend(), DType::bf16), loaded(cfg, host_backend(), DType::bf16);
  net.init(5), init.init(5), loaded.init(5);
  net.params().defer_masters();
  init.params().create_masters(), loaded.params().create_masters();
  load_checkpoint_weights(dir, loaded.params());  // the one-process load
  AdamW opt(net.params(), AdamWConfig{}, &world(), nullptr, nullptr, kDefaultGradBucketElements, fsdp);
  std::unique_ptr<ParamGather> gather;
  if (fsdp == Fsdp::grads_params) gather = std::make_unique<ParamGather>(net, opt, world());
  EXPECT_TRUE(opt.shards_masters());
  for (const model::Param* p : net.params().all()) EXPECT_FALSE(p->master.defined()) << p->name;
  expect_same_masters(opt, net, init, "(start-up)");

  const ShardWeightSink sink(opt, net.params());
  load_checkpoint_weights(dir, net.params(), "", &sink);
  if (gather) gather->refresh();
  for (const model::Param* p : net.params().all()) EXPECT_FALSE(p->master.defined()) << p->name << " (loaded)";
  expect_same_masters(opt, net, loaded, "(loaded)");
  if (gather) {
    model::HybridModel copy(cfg, host_backend(), DType::bf16, {}, /*trainable=*/false);
    gather->copy_whole_to(copy.params());
    expect_same_values(copy, loaded, "(loaded, gathered)");
  } else {
    expect_same_values(net, loaded, "(loaded)");
  }
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

TEST(ParamGather, deferred_masters_and_a_sharded_load_equal_one_process_under_optim) {
  check_deferred_masters_and_load(Fsdp::off);
}
TEST(ParamGather, deferred_masters_and_a_sharded_load_equal_one_process_under_optim_grads) {
  check_deferred_masters_and_load(Fsdp::grads);
}
TEST(ParamGather, deferred_masters_and_a_sharded_load_equal_one_process_under_optim_grads_params) {
  check_deferred_masters_and_load(Fsdp::grads_params);
}

TEST(ParamGather, whole_copy_equals_the_unsharded_weights_in_float32) { check(DType::f32); }
TEST(ParamGather, whole_copy_equals_the_unsharded_weights_in_bf16) { check(DType::bf16); }

}  // namespace
}  // namespace nemotron::train

int main(int argc, char** argv) { return nemotron::testing::run_mpi_gtests(argc, argv); }
