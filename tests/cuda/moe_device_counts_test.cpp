// MoE inference without the host synchronisation: ops::grouped_linear_forward_counted reads the
// experts' row counts on the device (our wgmma kernel, its problems built by a device kernel), and
// the MoE mixer takes that path when nothing needs the counts on the host (no backward, no
// statistics). The tiles that run are those of the host-built launch, so the outputs must be equal
// bit for bit, not merely close; every output row must be written (the buffers start as NaN).
#include <gtest/gtest.h>

#include <cstring>
#include <cuda_runtime_api.h>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/rng.h"
#include "model/block_configs.h"
#include "model/moe_mixer.h"
#include "ops/grouped_gemm_wgmma.h"
#include "ops/grouped_matmul.h"
#include "ops/grouped_matmul_cuda.h"

namespace nemotron {
namespace {

std::vector<uint16_t> bf16_bits(const Tensor& t) {
  const Tensor h = t.to_host(DType::bf16);
  std::vector<uint16_t> v(static_cast<size_t>(h.numel()));
  std::memcpy(v.data(), h.raw(), v.size() * sizeof(uint16_t));
  return v;
}

Tensor nan_filled(Context& ctx, Shape shape) {
  Tensor t = ctx.empty(std::move(shape), DType::bf16);
  EXPECT_EQ(cudaMemset(t.raw(), 0xFF, static_cast<size_t>(t.numel()) * 2), cudaSuccess);  // bf16 NaN
  return t;
}

Tensor random_bf16(Backend& b, Shape shape, uint64_t stream) {
  Tensor t = Tensor::empty(std::move(shape), DType::bf16, b);
  fill_normal(t, Philox(11, stream), 0.0, 0.5);
  return t;
}

struct CountsCase {
  std::vector<int32_t> counts;
  int64_t in, out;
};

TEST(MoeDeviceCounts, GroupedForwardEqualsTheHostOffsetLaunchBitForBit) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  if (!ops::grouped_gemm_wgmma_supported()) GTEST_SKIP() << "our Hopper kernel does not run here";
  Context ctx{&gpu, nullptr, DType::bf16};
  std::vector<CountsCase> cases = {
      {{0, 130, 7, 257, 0, 0, 1}, 136, 264},  // tiles with tails, empty experts in the middle and at the end
      {{0, 0, 0, 5}, 64, 128},                // only the last expert has rows
      {{300, 1, 0, 129, 200}, 200, 392},      // several row tiles per expert, K not a multiple of 64
  };
  std::vector<int32_t> decode(64, 0);  // decode-like: 1536 slots over 64 experts, some empty
  for (int i = 0; i < 1536; ++i) ++decode[static_cast<size_t>((i * 37 + i / 7) % 61)];
  cases.push_back({decode, 256, 768});
  for (const CountsCase& c : cases) {
    const int64_t E = static_cast<int64_t>(c.counts.size());
    std::vector<int64_t> offsets(1, 0);
    for (int32_t n : c.counts) offsets.push_back(offsets.back() + n);
    const int64_t S = offsets.back();
    const Tensor x = random_bf16(gpu, {S, c.in}, 1);
    std::vector<Tensor> ws;
    for (int64_t e = 0; e < E; ++e) ws.push_back(random_bf16(gpu, {c.out, c.in}, 100 + static_cast<uint64_t>(e)));
    Tensor counts = Tensor::empty({E}, DType::i32);
    std::memcpy(counts.raw(), c.counts.data(), c.counts.size() * sizeof(int32_t));

    Tensor y_host = nan_filled(ctx, {S, c.out}), y_dev = nan_filled(ctx, {S, c.out});
    ops::grouped_linear_forward(ctx, x, offsets, ws, y_host);
    EXPECT_STREQ(ops::grouped_gemm_last_path(false), "ours-wgmma");
    ASSERT_TRUE(ops::grouped_linear_counted_on_device(x, ws, y_dev));
    ops::grouped_linear_forward_counted(ctx, x, counts.to(gpu), ws, y_dev);
    EXPECT_STREQ(ops::grouped_gemm_last_path(false), "ours-wgmma-device-counts");
    EXPECT_EQ(bf16_bits(y_dev), bf16_bits(y_host)) << S << " rows over " << E << " experts, " << c.in << " -> " << c.out;
  }
}

TEST(MoeDeviceCounts, MixerInferenceKeepsTheCountsOnTheDeviceAndMatchesTheTrainingPath) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  if (!ops::grouped_gemm_wgmma_supported()) GTEST_SKIP() << "our Hopper kernel does not run here";
  for (const testing::MoeShape& shape : {testing::kMoeNanoScale, testing::kMoeSuperScale}) {
    const model::ModelConfig cfg = testing::moe_config(shape);
    model::ParamStore store(gpu, DType::bf16);
    model::MoeMixer moe(cfg, store, testing::kMoePrefix, 1);
    moe.init(5);
    Context ctx{&gpu, nullptr, DType::bf16};
    const Tensor u = random_bf16(gpu, {3, 41, cfg.hidden_size}, 2);
    // With statistics: the host counts (the training path's routing).
    model::MoeLayerStats stats;
    const Tensor with_stats = moe.forward(ctx, u, nullptr, &stats);
    EXPECT_STREQ(ops::grouped_gemm_last_path(false), "ours-wgmma");
    int64_t slots = 0;
    for (int64_t n : stats.tokens_per_expert) slots += n;
    EXPECT_EQ(slots, 3 * 41 * shape.K);
    // Inference: no statistics, no saved state -> the counts stay on the device.
    const Tensor inference = moe.forward(ctx, u, nullptr);
    EXPECT_STREQ(ops::grouped_gemm_last_path(false), "ours-wgmma-device-counts");
    EXPECT_EQ(bf16_bits(inference), bf16_bits(with_stats)) << "H " << shape.H << ", E " << shape.E;
  }
}

}  // namespace
}  // namespace nemotron
