// qkv_rope_cache_write as a harness case (the CUDA kernel against the CPU float64 reference, the
// composition of split_columns, rope_forward and kv_cache_write_decode): fused rows of several
// tokens at scattered positions written to scattered cache rows, with and without RoPE, the
// Llama-3 frequency rule. The outputs are q and both whole caches, so untouched rows are compared too.
#include <gtest/gtest.h>

#include "decode_test_util.h"
#include "harness.h"
#include "ops/fused_projection.h"
#include "ops/kv_cache_decode.h"
#include "ops/qkv_rope_cache.h"
#include "ops/rope.h"

namespace nemotron::testing {
namespace {

class QkvRopeCacheCase : public OpCase {
 public:
  QkvRopeCacheCase(std::vector<int32_t> positions, std::vector<int32_t> slots, int64_t blocks, int64_t bs, int64_t nq,
                   int64_t nkv, int64_t hd, bool rope, ops::RopeFreq freq = {10000.0})
      : pos_(std::move(positions)), slots_(std::move(slots)), blocks_(blocks), bs_(bs), nq_(nq), nkv_(nkv), hd_(hd),
        rope_(rope), freq_(freq) {}
  std::string op() const override { return "qkv_rope_cache_write"; }
  std::string params() const override {
    return fmt::format("pos={},slots={},blocks={},bs={},nq={},nkv={},hd={},rope={},theta={},llama3={}", counts_str(pos_),
                       counts_str(slots_), blocks_, bs_, nq_, nkv_, hd_, rope_, freq_.theta, freq_.llama3());
  }
  bool has_backward() const override { return false; }
  std::vector<InputSpec> inputs() const override {
    const int64_t n = static_cast<int64_t>(pos_.size());
    return {{"qkv", {n, (nq_ + 2 * nkv_) * hd_}, DType::f64, false},
            {"k_cache", {blocks_, bs_, nkv_, hd_}, DType::f64, false},
            {"v_cache", {blocks_, bs_, nkv_, hd_}, DType::f64, false}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    const int64_t n = static_cast<int64_t>(pos_.size());
    Tensor q = ctx.empty({n, nq_, hd_}, in[0].dtype());
    Tensor kc = in[1].clone(), vc = in[2].clone();
    ops::qkv_rope_cache_write(ctx, in[0], rope_ ? &freq_ : nullptr, i32_on(ctx, pos_), i32_on(ctx, slots_), q, kc, vc);
    return {q, kc, vc};
  }

 private:
  std::vector<int32_t> pos_, slots_;
  int64_t blocks_, bs_, nq_, nkv_, hd_;
  bool rope_;
  ops::RopeFreq freq_;
};

NM_OP_CASES(qkv_rope_cache_write_cases) {
  CaseList c;
  using V = std::vector<int32_t>;
  c.push_back(std::make_unique<QkvRopeCacheCase>(V{0}, V{3}, 2, 2, 2, 1, 4, true));
  c.push_back(std::make_unique<QkvRopeCacheCase>(V{5, 0, 17, 4000}, V{9, 30, 2, 17}, 4, 8, 6, 2, 16, true));
  c.push_back(std::make_unique<QkvRopeCacheCase>(V{5, 0, 17}, V{9, 30, 2}, 4, 8, 6, 2, 16, false));
  // The 8B shape (32 + 2 x 8 heads of 128: six groups of eight heads), Llama-3 frequencies.
  c.push_back(std::make_unique<QkvRopeCacheCase>(V{300, 7, 511}, V{40, 41, 0}, 4, 16, 32, 8, 128, true,
                                                 ops::RopeFreq{500000.0, 8.0, 1.0, 4.0, 8192.0}));
  // Heads that do not fill the last group of eight (3 + 2 x 1).
  c.push_back(std::make_unique<QkvRopeCacheCase>(V{1, 2}, V{5, 11}, 3, 4, 3, 1, 10, true));
  return c;
}

// The fused op equals the ops it replaces, run one by one (on the CPU: float64, exactly).
TEST(QkvRopeCacheWrite, equals_split_rope_and_cache_writes) {
  Context ctx = cpu_context(DType::f64);
  const int64_t n = 3, nq = 4, nkv = 2, hd = 8, blocks = 4, bs = 4;
  const std::vector<int32_t> pos{3, 0, 9}, slots{6, 13, 1};
  Tensor qkv = random_tensor({n, (nq + 2 * nkv) * hd}, DType::f64, 1);
  Tensor kc = random_tensor({blocks, bs, nkv, hd}, DType::f64, 2), vc = random_tensor({blocks, bs, nkv, hd}, DType::f64, 3);
  Tensor kc2 = kc.clone(), vc2 = vc.clone();
  const ops::RopeFreq freq{10000.0};
  Tensor q = Tensor::empty({n, nq, hd}, DType::f64);
  ops::qkv_rope_cache_write(ctx, qkv, &freq, i32_tensor(pos), i32_tensor(slots), q, kc, vc);
  Tensor q2 = Tensor::empty({1, n, nq, hd}, DType::f64), k2 = Tensor::empty({1, n, nkv, hd}, DType::f64),
         v2 = Tensor::empty({1, n, nkv, hd}, DType::f64);
  Tensor parts[] = {q2.view({n, nq * hd}), k2.view({n, nkv * hd}), v2.view({n, nkv * hd})};
  ops::split_columns(ctx, qkv, parts);
  const Tensor p = Tensor::from_vector<int32_t>({1, n}, pos);
  ops::rope_forward(ctx, q2, freq, q2, 0, p);
  ops::rope_forward(ctx, k2, freq, k2, 0, p);
  ops::kv_cache_write_decode(ctx, k2.view({n, nkv, hd}), i32_tensor(slots), kc2);
  ops::kv_cache_write_decode(ctx, v2.view({n, nkv, hd}), i32_tensor(slots), vc2);
  EXPECT_EQ(q.to_f64_vector(), q2.to_f64_vector());
  EXPECT_EQ(kc.to_f64_vector(), kc2.to_f64_vector());
  EXPECT_EQ(vc.to_f64_vector(), vc2.to_f64_vector());
  // Bad input names what is wrong.
  EXPECT_THROW(ops::qkv_rope_cache_write(ctx, qkv, &freq, i32_tensor({1, 2}), i32_tensor(slots), q, kc, vc), Error);
  Tensor narrow = random_tensor({n, 2 * nkv * hd}, DType::f64, 4);
  EXPECT_THROW(ops::qkv_rope_cache_write(ctx, narrow, &freq, i32_tensor(pos), i32_tensor(slots), q, kc, vc), Error);
}

}  // namespace
}  // namespace nemotron::testing
