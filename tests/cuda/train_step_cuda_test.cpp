// The training step on CUDA reads the loss once per step (train_step.h: defer_loss_read and
// sum_loss_values): a micro-batch's forward/backward with the read deferred waits for the GPU
// exactly once less than with it (core/host_waits.h counts the waits), and a step of three
// micro-batches on the GPU gives the loss and gradient norm of the same step on the CPU (float32
// on both sides: rounding only; a lost or doubled micro-batch would be off by a third).
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "core/host_waits.h"
#include "core/rng.h"
#include "train/train_fixtures.h"
#include "train/train_step.h"

namespace nemotron::train {
namespace {

model::Batch random_batch(const model::ModelConfig& cfg, int64_t B, int64_t T, uint64_t seed) {
  Philox rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(B * T)), labels(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(rng.bits(i) % cfg.vocab_size);
  for (size_t i = 0; i < ids.size(); ++i) labels[i] = (i + 1) % T == 0 ? -100 : ids[i + 1];
  return {Tensor::from_vector<int32_t>({B, T}, ids), Tensor::from_vector<int32_t>({B, T}, labels), Tensor()};
}

model::Batch on(const model::Batch& b, Backend& gpu) {
  model::Batch d = b;
  d.input_ids = b.input_ids.to(gpu), d.labels = b.labels.to(gpu);
  return d;
}

TEST(TrainStepCuda, loss_is_read_once_per_step) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  model::ModelConfig cfg = testing::tiny_train_config().model;
  cfg.hybrid_override_pattern = "M*-";  // no router: CPU and GPU rounding must not pick other experts
  model::HybridModel cpu_net(cfg, host_backend(), DType::f32), gpu_net(cfg, gpu, DType::f32);
  cpu_net.init(7);
  for (size_t k = 0; k < cpu_net.params().all().size(); ++k)
    gpu_net.params().all()[k]->value.copy_from(cpu_net.params().all()[k]->value);
  std::vector<model::Batch> micro, micro_gpu;
  for (uint64_t s = 1; s <= 3; ++s) micro.push_back(random_batch(cfg, 2, 16, s));
  for (const model::Batch& b : micro) micro_gpu.push_back(on(b, gpu));

  // One micro-batch alone, read now and read later: one wait fewer, the same sum.
  MaskedCrossEntropy ce;
  Context ctx{&gpu, nullptr, DType::f32};
  int64_t w0 = host_waits();
  const MicroBatchResult now = forward_backward(ctx, gpu_net, micro_gpu[0], ce, 0, 0.0);
  const int64_t waits_now = host_waits() - w0;
  w0 = host_waits();
  const MicroBatchResult later = forward_backward(ctx, gpu_net, micro_gpu[0], ce, 0, 0.0, nullptr, nullptr, nullptr,
                                                  /*defer_loss_read=*/true);
  const int64_t waits_later = host_waits() - w0;
  EXPECT_EQ(waits_now - waits_later, 1);
  // What is left: the embedding's token-id check and the loss's label check, both in the forward;
  // the embedding backward reads nothing back (its ids are the ones the forward checked).
  EXPECT_EQ(waits_later, 2);
  EXPECT_EQ(later.loss_sum, 0.0);
  ASSERT_TRUE(later.loss_values.defined());
  EXPECT_TRUE(later.loss_values.device().is_cuda());
  EXPECT_NEAR(sum_loss_values({later.loss_values}), now.loss_sum, 1e-6 * std::fabs(now.loss_sum));
  EXPECT_GT(now.loss_sum, 0.0);

  // A whole step of three micro-batches against the CPU's.
  AdamW cpu_opt(cpu_net.params(), {}), gpu_opt(gpu_net.params(), {});
  TrainStep cpu_step(cpu_net, cpu_opt, StepConfig{1.0, {}}), gpu_step(gpu_net, gpu_opt, StepConfig{1.0, {}});
  const StepResult rc = cpu_step.run(micro, ce, 1e-3, 1), rg = gpu_step.run(micro_gpu, ce, 1e-3, 1);
  EXPECT_EQ(rc.normaliser, rg.normaliser);
  EXPECT_NEAR(rg.loss_sum, rc.loss_sum, 1e-5 * rc.loss_sum);
  EXPECT_NEAR(rg.loss, rc.loss, 1e-5 * rc.loss);
  EXPECT_NEAR(rg.grad_norm, rc.grad_norm, 1e-3 * rc.grad_norm);
}

}  // namespace
}  // namespace nemotron::train
