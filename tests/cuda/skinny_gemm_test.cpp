// The skinny GEMM (ops/skinny_gemm_cuda.h) as ops::matmul runs it for decode-size bfloat16
// linears: it is the path taken, it writes every output, it agrees with cuBLASLt on the same
// bfloat16 inputs, and each row of y is bit-for-bit the same whatever the number of rows beside
// it (1..16): a sequence's logits do not depend on the batch it decodes in. Shapes with few rows of
// W (the 8B's k/v_proj at tensor parallel 2, 512 x 4096) take the K split over a cluster of
// blocks; it agrees with the unsplit kernel and gives the same bits call after call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cuda_runtime_api.h>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/rng.h"
#include "ops/matmul.h"
#include "ops/matmul_cuda.h"
#include "ops/skinny_gemm_cuda.h"

namespace nemotron {
namespace {

Tensor random_bf16(Backend& b, Shape shape, uint64_t stream) {
  Tensor t = Tensor::empty(std::move(shape), DType::bf16, b);
  fill_normal(t, Philox(23, stream), 0.0, 0.5);
  return t;
}

Tensor nan_filled(Context& ctx, Shape shape) {
  Tensor t = ctx.empty(std::move(shape), DType::bf16);
  EXPECT_EQ(cudaMemset(t.raw(), 0xFF, static_cast<size_t>(t.numel()) * 2), cudaSuccess);  // bf16 NaN
  return t;
}

std::vector<uint16_t> bf16_bits(const Tensor& t) {
  const Tensor h = t.to_host(DType::bf16);
  std::vector<uint16_t> v(static_cast<size_t>(h.numel()));
  std::memcpy(v.data(), h.raw(), v.size() * sizeof(uint16_t));
  return v;
}

TEST(SkinnyGemm, RowsAreBatchInvariantAndMatchCublasLt) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context ctx{&gpu, nullptr, DType::bf16};
  for (auto [N, K] : {std::pair<int64_t, int64_t>{4096, 4096}, {300, 1032}, {1000, 14336}, {512, 4096}, {2048, 4096}}) {
    const Tensor x = random_bf16(gpu, {16, K}, 1), w = random_bf16(gpu, {N, K}, 2);
    ops::MatmulCudaArgs probe;
    probe.a = x.raw(), probe.b = w.raw(), probe.ab = probe.c_dtype = ops::GemmDType::bf16;
    probe.trans_b = true, probe.M = 1, probe.N = N, probe.K = K, probe.lda = probe.ldb = K;
    ASSERT_TRUE(ops::uses_skinny_gemm(probe)) << "N=" << N << " K=" << K << ": one row should take the skinny GEMM";

    Tensor all = nan_filled(ctx, {16, N});
    ops::linear_forward(ctx, x, w, all);
    const std::vector<uint16_t> all_bits = bf16_bits(all);
    for (int64_t M = 1; M <= 16; ++M) {
      Tensor y = nan_filled(ctx, {M, N});
      ops::linear_forward(ctx, x.slice(0, M), w, y);
      const std::vector<uint16_t> bits = bf16_bits(y);
      EXPECT_EQ(0, std::memcmp(bits.data(), all_bits.data(), bits.size() * 2))
          << "N=" << N << " K=" << K << ": the first " << M << " rows differ from the same rows of a 16-row call";
    }

    ops::set_skinny_gemm_enabled(false);
    ASSERT_FALSE(ops::uses_skinny_gemm(probe));
    Tensor ref = nan_filled(ctx, {16, N});
    ops::linear_forward(ctx, x, w, ref);
    ops::set_skinny_gemm_enabled(true);
    const std::vector<double> got = all.to_f64_vector(), want = ref.to_f64_vector();
    double d = 0, n = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "N=" << N << " K=" << K << ": output " << i << " not written";
      d += (got[i] - want[i]) * (got[i] - want[i]), n += want[i] * want[i];
    }
    // Both sum float32 products of the same bfloat16 inputs; they differ by the order of the sum
    // and the final rounding to bfloat16 (2^-9 relative).
    EXPECT_LT(std::sqrt(d / n), 4e-3) << "N=" << N << " K=" << K << ": skinny GEMM against cuBLASLt";
  }
}

TEST(SkinnyGemm, KSplitAgreesWithUnsplitAndRepeatsBitForBit) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context ctx{&gpu, nullptr, DType::bf16};
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  for (auto [N, K] : {std::pair<int64_t, int64_t>{512, 4096}, {1024, 4096}, {40, 2056}, {24, 7168}}) {
    const Tensor x = random_bf16(gpu, {16, K}, 3), w = random_bf16(gpu, {N, K}, 4);
    ops::SkinnyGemmCudaArgs a;
    a.x = x.raw(), a.w = w.raw(), a.M = 16, a.N = N, a.K = K, a.lda = a.ldw = K;
    const int splits = ops::skinny_gemm_k_splits(a, sms);
    if (sms >= 128) {
      EXPECT_GT(splits, 1) << "N=" << N << " K=" << K << ": few tiles should split K";
    }
    Tensor split = nan_filled(ctx, {16, N}), again = nan_filled(ctx, {16, N}), whole = nan_filled(ctx, {16, N});
    const cudaStream_t stream = cuda::cuda_stream(ctx);
    a.y = split.raw();
    ASSERT_EQ(ops::skinny_gemm_cuda(a, stream), cudaSuccess);
    a.y = again.raw();
    ASSERT_EQ(ops::skinny_gemm_cuda(a, stream), cudaSuccess);
    a.y = whole.raw(), a.k_splits = 1;
    ASSERT_EQ(ops::skinny_gemm_cuda(a, stream), cudaSuccess);
    EXPECT_EQ(bf16_bits(split), bf16_bits(again)) << "N=" << N << " K=" << K << ": the split sum is not deterministic";
    const std::vector<double> got = split.to_f64_vector(), want = whole.to_f64_vector();
    double d = 0, n = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "N=" << N << " K=" << K << ": output " << i << " not written";
      d += (got[i] - want[i]) * (got[i] - want[i]), n += want[i] * want[i];
    }
    // The same float32 products summed in another order, each rounded to bfloat16 once.
    EXPECT_LT(std::sqrt(d / n), 4e-3) << "N=" << N << " K=" << K << " splits " << splits;
  }
}

}  // namespace
}  // namespace nemotron
