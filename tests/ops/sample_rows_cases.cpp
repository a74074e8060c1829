// ops::sample_rows (greedy and temperature-only draws where the logits are). On the CPU: every
// row of a [S, V] tensor equals the row reference, bfloat16 logits are widened exactly, and draws
// at evenly spread u follow softmax(z / T) (each id's share of u in [0, 1) is its probability),
// with the log-probs of that distribution. On a GPU: the kernel's tokens equal the CPU
// reference's and its log-probs agree to float rounding, for float32 and bfloat16 logits, greedy
// and tempered rows mixed, vocabularies smaller and larger than the block, and ties. At u just
// below 1 the cumulative sum can round short of u: both then draw the last id of non-zero weight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/rng.h"
#include "ops/sample_rows.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace nemotron::testing {
namespace {

std::vector<float> random_logits(int64_t S, int64_t V, uint64_t seed, double scale = 4.0) {
  std::vector<float> z(static_cast<size_t>(S * V));
  Philox rng(seed);
  for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<float>(scale * rng.normal(i));
  return z;
}

Tensor bf16_tensor(int64_t S, int64_t V, const std::vector<uint16_t>& bits) {
  Tensor t = Tensor::empty({S, V}, DType::bf16);
  std::memcpy(t.raw(), bits.data(), bits.size() * sizeof(uint16_t));
  return t;
}

std::vector<ops::RowSampling> mixed_rows(int64_t S, uint64_t seed) {
  const double temps[] = {0.0, 0.6, 1.0, 1.0, 1.5};
  std::vector<ops::RowSampling> rows(static_cast<size_t>(S));
  Philox rng(seed);
  for (int64_t i = 0; i < S; ++i) rows[i] = {temps[i % 5], rng.uniform(static_cast<uint64_t>(i))};
  return rows;
}

TEST(SampleRows, CpuRowsEqualTheRowReferenceAndBf16IsWidened) {
  const int64_t S = 11, V = 1000;
  std::vector<float> z = random_logits(S, V, 3);
  const std::vector<ops::RowSampling> rows = mixed_rows(S, 4);
  Context ctx{&host_backend(), nullptr, DType::f32};
  const std::vector<ops::TokenDraw> got = ops::sample_rows(ctx, Tensor::from_vector<float>({S, V}, z), rows);
  std::vector<uint16_t> h(z.size());
  std::vector<float> widened(z.size());
  for (size_t i = 0; i < z.size(); ++i) widened[i] = bf16_to_f32(h[i] = f32_to_bf16(z[i]));
  const Tensor bf = bf16_tensor(S, V, h);
  const std::vector<ops::TokenDraw> got16 = ops::sample_rows(ctx, bf, rows);
  for (int64_t i = 0; i < S; ++i) {
    const ops::TokenDraw want = ops::sample_row(z.data() + i * V, V, rows[i].temperature, rows[i].u);
    EXPECT_EQ(got[i].token, want.token);
    EXPECT_EQ(got[i].logprob, want.logprob);
    EXPECT_EQ(got[i].raw_logprob, want.raw_logprob);
    const ops::TokenDraw want16 = ops::sample_row(widened.data() + i * V, V, rows[i].temperature, rows[i].u);
    EXPECT_EQ(got16[i].token, want16.token);
    EXPECT_EQ(got16[i].logprob, want16.logprob);
  }
}

TEST(SampleRows, DrawsFollowTheTemperedSoftmaxAndGreedyTakesTheFirstMaximum) {
  const std::vector<float> z = {0.5f, -1.0f, 2.0f, 2.0f, 0.0f};
  const int64_t V = 5, N = 20000;
  for (double T : {0.5, 1.0, 2.0}) {
    std::vector<double> p(V);
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += (p[v] = std::exp(z[v] / T));
    double raw = 0;
    for (int64_t v = 0; v < V; ++v) raw += std::exp(z[v]);
    std::vector<int64_t> count(V, 0);
    for (int64_t k = 0; k < N; ++k) {
      const ops::TokenDraw d = ops::sample_row(z.data(), V, T, (k + 0.5) / N);
      ASSERT_TRUE(d.token >= 0 && d.token < V);
      ++count[d.token];
      EXPECT_NEAR(d.logprob, std::log(p[d.token] / s), 1e-6);
      EXPECT_NEAR(d.raw_logprob, z[d.token] - std::log(raw), 1e-6);
    }
    for (int64_t v = 0; v < V; ++v) EXPECT_NEAR(static_cast<double>(count[v]) / N, p[v] / s, 1.0 / N) << "T " << T << " id " << v;
  }
  const ops::TokenDraw g = ops::sample_row(z.data(), V, 0.0, 0.99);
  EXPECT_EQ(g.token, 2);  // ids 2 and 3 tie: the lowest
}

// 7 equal weights, then a tail whose weights underflow to 0. Seven additions of 1/7 end at
// 1 - 2^-52, below u = 1 - 2^-53: no id passes u, and the draw is id 6 (the last one that can be
// drawn, log-prob log(1/7)), not the last id of the row (probability 0, log-prob -inf).
std::vector<float> short_sum_row(int64_t V) {
  std::vector<float> z(static_cast<size_t>(V), -1.0e4f);
  for (int64_t v = 0; v < 7; ++v) z[static_cast<size_t>(v)] = 0.0f;
  return z;
}
const double kLastU = std::nextafter(1.0, 0.0);

TEST(SampleRows, AUThatTheSumRoundsShortOfDrawsTheLastIdOfNonZeroWeight) {
  const std::vector<float> z = short_sum_row(1000);
  const ops::TokenDraw d = ops::sample_row(z.data(), 1000, 1.0, kLastU);
  EXPECT_EQ(d.token, 6);
  EXPECT_NEAR(d.logprob, std::log(1.0 / 7), 1e-6);
  EXPECT_NEAR(d.raw_logprob, std::log(1.0 / 7), 1e-6);
}

TEST(SampleRows, BadArgumentsAreRefused) {
  Context ctx{&host_backend(), nullptr, DType::f32};
  const Tensor z = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const std::vector<ops::RowSampling> one{{1.0, 0.5}}, bad_u{{1.0, 0.5}, {1.0, 1.0}}, bad_t{{-1.0, 0.5}, {1.0, 0.5}};
  EXPECT_THROW(ops::sample_rows(ctx, z, one), Error);
  EXPECT_THROW(ops::sample_rows(ctx, z, bad_u), Error);
  EXPECT_THROW(ops::sample_rows(ctx, z, bad_t), Error);
}

#if NEMOTRON_CUDA
TEST(SampleRows, CudaKernelEqualsTheCpuReference) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context gctx{&gpu, nullptr, DType::f32};
  int64_t compared = 0;
  for (int64_t V : {7, 513, 1000, 50257, 131072}) {
    const int64_t S = V > 100000 ? 64 : 37;
    std::vector<float> z = random_logits(S, V, 10 + static_cast<uint64_t>(V));
    if (V == 1000)  // ties: row 0 all equal, row 5 two maxima far apart (greedy rows: i % 5 == 0)
      for (int64_t v = 0; v < V; ++v) z[v] = 1.0f, z[5 * V + v] = v == 17 || v == 900 ? 30.0f : 0.0f;
    const std::vector<ops::RowSampling> rows = mixed_rows(S, 20 + static_cast<uint64_t>(V));
    for (DType dt : {DType::f32, DType::bf16}) {
      std::vector<float> ref = z;
      Tensor host;
      if (dt == DType::f32) {
        host = Tensor::from_vector<float>({S, V}, z);
      } else {
        std::vector<uint16_t> h(z.size());
        for (size_t i = 0; i < z.size(); ++i) ref[i] = bf16_to_f32(h[i] = f32_to_bf16(z[i]));
        host = bf16_tensor(S, V, h);
      }
      const std::vector<ops::TokenDraw> got = ops::sample_rows(gctx, host.to(gpu), rows);
      for (int64_t i = 0; i < S; ++i) {
        const ops::TokenDraw want = ops::sample_row(ref.data() + i * V, V, rows[i].temperature, rows[i].u);
        const std::string where = fmt::format("V {} {} row {} temperature {} u {}", V, dtype_name(dt), i,
                                              rows[i].temperature, rows[i].u);
        ASSERT_EQ(got[i].token, want.token) << where;
        EXPECT_NEAR(got[i].logprob, want.logprob, 2e-6 + 2e-6 * std::abs(want.logprob)) << where;
        EXPECT_NEAR(got[i].raw_logprob, want.raw_logprob, 2e-6 + 2e-6 * std::abs(want.raw_logprob)) << where;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 2 * (37 * 4 + 64));
}

TEST(SampleRows, CudaKernelDrawsTheLastIdOfNonZeroWeightWhenTheSumRoundsShort) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context gctx{&gpu, nullptr, DType::f32};
  for (int64_t V : {7, 1000, 131072}) {  // one id a chunk, and chunks of 2 and 256 ids
    const std::vector<float> z = short_sum_row(V);
    const std::vector<ops::RowSampling> rows{{1.0, kLastU}};
    const ops::TokenDraw got = ops::sample_rows(gctx, Tensor::from_vector<float>({1, V}, z).to(gpu), rows)[0];
    const ops::TokenDraw want = ops::sample_row(z.data(), V, 1.0, kLastU);
    EXPECT_EQ(got.token, want.token) << "V " << V;
    EXPECT_EQ(got.token, 6) << "V " << V;
    EXPECT_NEAR(got.logprob, std::log(1.0 / 7), 1e-6) << "V " << V;
  }
}
#endif

}  // namespace
}  // namespace nemotron::testing
