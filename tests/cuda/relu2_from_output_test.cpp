// ops::relu2_backward_from_output on the GPU in bfloat16: from the forward's output it gives the
// same dx as relu2_backward from the input, bit for bit (sqrt(round(r^2)) rounds back to r), for
// every positive bfloat16 whose square is a normal number and for random inputs of both signs.
// The MLP and MoE layers keep relu2's output instead of its input on the strength of this.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/rng.h"
#include "ops/activations.h"

namespace nemotron {
namespace {

std::vector<uint16_t> bits(const Tensor& t) {
  const Tensor h = t.to_host(DType::bf16);
  std::vector<uint16_t> v(static_cast<size_t>(h.numel()));
  std::memcpy(v.data(), h.raw(), v.size() * sizeof(uint16_t));
  return v;
}

TEST(Relu2FromOutput, equals_relu2_backward_bitwise_bf16) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context ctx{&gpu, nullptr, DType::bf16};
  // Every positive bfloat16 from 2^-63 (its square is 2^-126, the smallest normal) to 2^63, then
  // random values of both signs.
  std::vector<uint16_t> xb;
  for (uint32_t h = 0x2000; h < 0x5f00; ++h) xb.push_back(static_cast<uint16_t>(h));
  const int64_t exhaustive = static_cast<int64_t>(xb.size()), n = exhaustive + 40000;
  Tensor random = Tensor::empty({n - exhaustive}, DType::bf16, gpu);
  fill_normal(random, Philox(31, 1), 0.0, 2.0);
  const std::vector<uint16_t> rb = bits(random);
  xb.insert(xb.end(), rb.begin(), rb.end());
  Tensor xh = Tensor::empty({n}, DType::bf16);
  std::memcpy(xh.raw(), xb.data(), xb.size() * sizeof(uint16_t));
  const Tensor x = xh.to(gpu);
  Tensor dy = Tensor::empty({n}, DType::bf16, gpu);
  fill_normal(dy, Philox(31, 2), 0.0, 1.0);

  Tensor y = ctx.empty({n}, DType::bf16), from_x = ctx.empty({n}, DType::bf16), from_y = ctx.empty({n}, DType::bf16);
  ops::relu2_forward(ctx, x, y);
  ops::relu2_backward(ctx, x, dy, from_x);
  ops::relu2_backward_from_output(ctx, y, dy, from_y);
  const std::vector<uint16_t> a = bits(from_x), b = bits(from_y);
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (a[i] != b[i] && differ++ == 0) first = i;
  EXPECT_EQ(differ, 0) << "first at x bits 0x" << std::hex << (first >= 0 ? xb[first] : 0);
  int64_t positive = 0;
  for (int64_t i = exhaustive; i < n; ++i) positive += (xb[i] & 0x8000) == 0 && xb[i] != 0;
  EXPECT_GT(positive, 10000) << "the random half should hold positive inputs";
}

}  // namespace
}  // namespace nemotron
