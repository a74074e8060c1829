// attention_decode and kv_cache_write_decode: the harness (CPU float32 against float64) on random
// caches with scattered block tables, and THE proof: keys and values written block by block into
// a paged cache, then the last n queries of each sequence (n = 1: decode; n > 1: a prefill chunk
// after earlier context; n = L: a whole prompt) against attention_forward over the whole sequence.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "decode_test_util.h"
#include "harness.h"
#include "ops/attention.h"
#include "ops/attention_decode.h"
#include "ops/kv_cache_decode.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace nemotron::testing {
namespace {

// Blocks handed to the sequences of context lengths `lens` from a pool of `blocks`, in a scrambled
// order: [S, M] int32, padded with -1 (never read).
Tensor scattered_table(const std::vector<int32_t>& lens, int64_t bs, int64_t blocks, int64_t* M) {
  *M = 0;
  for (int32_t L : lens) *M = std::max<int64_t>(*M, (L + bs - 1) / bs);
  std::vector<int32_t> order(static_cast<size_t>(blocks));
  std::iota(order.begin(), order.end(), 0);
  std::reverse(order.begin(), order.end());
  std::rotate(order.begin(), order.begin() + blocks / 3, order.end());
  std::vector<int32_t> t(lens.size() * static_cast<size_t>(*M), -1);
  size_t next = 0;
  for (size_t i = 0; i < lens.size(); ++i)
    for (int64_t b = 0; b < (lens[i] + bs - 1) / bs; ++b) t[i * *M + b] = order.at(next++);
  return Tensor::from_vector<int32_t>({static_cast<int64_t>(lens.size()), *M}, t);
}

class AttentionDecodeCase : public OpCase {
 public:
  AttentionDecodeCase(std::vector<int32_t> counts, std::vector<int32_t> lens, int64_t bs, int64_t nq, int64_t nkv,
                      int64_t hd)
      : counts_(std::move(counts)), lens_(std::move(lens)), bs_(bs), nq_(nq), nkv_(nkv), hd_(hd) {
    for (int32_t n : counts_) Ntot_ += n;
    for (int32_t L : lens_) blocks_ += (L + bs_ - 1) / bs_;
    blocks_ += 2;  // unused blocks stay unread
  }
  std::string op() const override { return "attention_decode"; }
  std::string params() const override {
    return fmt::format("n={},L={},bs={},nq={},nkv={},hd={}", counts_str(counts_), counts_str(lens_), bs_, nq_, nkv_, hd_);
  }
  bool has_backward() const override { return false; }
  std::vector<InputSpec> inputs() const override {
    return {{"q", {Ntot_, nq_, hd_}, DType::f64, false},
            {"k_cache", {blocks_, bs_, nkv_, hd_}, DType::f64, false},
            {"v_cache", {blocks_, bs_, nkv_, hd_}, DType::f64, false}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    int64_t M = 0;
    Tensor table = scattered_table(lens_, bs_, blocks_, &M);
    if (!ctx.backend->device().is_cpu()) table = table.to(*ctx.backend);
    Tensor o = ctx.empty(in[0].shape(), in[0].dtype());
    ops::attention_decode_forward(ctx, in[0], in[1], in[2], {table, i32_on(ctx, offsets_of(counts_)), i32_on(ctx, lens_)}, o);
    return {o};
  }

 private:
  std::vector<int32_t> counts_, lens_;
  int64_t bs_, nq_, nkv_, hd_, Ntot_ = 0, blocks_ = 0;
};

NM_OP_CASES(attention_decode_cases) {
  CaseList c;
  using V = std::vector<int32_t>;
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1}, V{1}, 4, 2, 1, 8));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 1, 1}, V{9, 1, 16}, 4, 4, 2, 8));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{5, 1, 0, 17}, V{12, 30, 3, 17}, 8, 6, 2, 16));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 1}, V{70, 33}, 16, 8, 8, 64));
  // Realistic heads (hd 128, GQA 8:2; hd 40 with a partial last lane group) with decode steps
  // beside prefill chunks, one a whole prompt.
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 9, 1, 40}, V{37, 9, 130, 40}, 16, 8, 2, 128));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{3, 1}, V{21, 50}, 8, 4, 1, 40));
  // Long contexts split over the split group kernel's warps (8 warps x 4 keys in flight; a warp's last
  // group partial), beside a sequence shorter than the warp count; G 8 at hd 256 runs 4 warps.
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 1, 5}, V{333, 3, 70}, 16, 32, 8, 128));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 2}, V{129, 200}, 16, 16, 2, 128));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 1}, V{97, 40}, 8, 16, 2, 256));
  // More (token, KV head) groups than 4 per multiprocessor (602 > 4 x 132): the warp-per-group kernel.
  c.push_back(std::make_unique<AttentionDecodeCase>(V{300, 1}, V{300, 40}, 16, 8, 2, 16));
  // The same in bf16 with heads of 64, 128 and 256: the chunk kernel (a key per 8, 16 or 32
  // lanes, 16 / 8 / 2 keys in flight per step at G 2 / 4 / 8), with contexts that end inside a
  // step and inside a block, a decode row beside a whole prompt, one of a single key.
  c.push_back(std::make_unique<AttentionDecodeCase>(V{280, 1, 1}, V{280, 131, 1}, 16, 4, 2, 64));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{300, 1, 2}, V{300, 77, 9}, 16, 8, 2, 128));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{270, 1}, V{300, 45}, 16, 16, 2, 256));
  // The 8B shape (32 query heads on 8 KV heads of 128) at batch 1 and 3: in bf16 the chunk kernel
  // splits each pair's keys into many chunks merged after (contexts ending mid-chunk, a sequence
  // shorter than one chunk, two new tokens whose contexts differ by one key).
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1}, V{509}, 16, 32, 8, 128));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 2, 1}, V{3, 260, 131}, 16, 32, 8, 128));
  // A block size that is not a power of two (the chunk kernel divides instead of shifting).
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 3}, V{200, 77}, 12, 32, 8, 128));
  // The same for the other kernels (each divides instead of shifting): per head (G 1), the split
  // group kernel (hd 40: no chunk kernel in bf16 either) and the warp-group one (602 groups).
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 4}, V{50, 23}, 6, 4, 4, 32));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{1, 1, 3}, V{70, 130, 9}, 12, 8, 2, 40));
  c.push_back(std::make_unique<AttentionDecodeCase>(V{300, 1}, V{300, 40}, 12, 8, 2, 16));
  return c;
}

// kv_cache_write_decode as a harness case: new rows written to scattered cache rows (out of
// order, across blocks); the output is the whole cache, so untouched rows are compared too.
class KvCacheWriteCase : public OpCase {
 public:
  KvCacheWriteCase(std::vector<int32_t> rows, int64_t blocks, int64_t bs, int64_t nkv, int64_t hd)
      : rows_(std::move(rows)), blocks_(blocks), bs_(bs), nkv_(nkv), hd_(hd) {}
  std::string op() const override { return "kv_cache_write_decode"; }
  std::string params() const override {
    return fmt::format("rows={},blocks={},bs={},nkv={},hd={}", counts_str(rows_), blocks_, bs_, nkv_, hd_);
  }
  bool has_backward() const override { return false; }
  std::vector<InputSpec> inputs() const override {
    return {{"src", {static_cast<int64_t>(rows_.size()), nkv_, hd_}, DType::f64, false},
            {"cache", {blocks_, bs_, nkv_, hd_}, DType::f64, false}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor cache = in[1].clone();
    ops::kv_cache_write_decode(ctx, in[0], i32_on(ctx, rows_), cache);
    return {cache};
  }

 private:
  std::vector<int32_t> rows_;
  int64_t blocks_, bs_, nkv_, hd_;
};

NM_OP_CASES(kv_cache_write_decode_cases) {
  CaseList c;
  c.push_back(std::make_unique<KvCacheWriteCase>(std::vector<int32_t>{5}, 3, 2, 1, 2));
  c.push_back(std::make_unique<KvCacheWriteCase>(std::vector<int32_t>{17, 3, 8, 9, 30}, 4, 8, 2, 16));
  c.push_back(std::make_unique<KvCacheWriteCase>(std::vector<int32_t>{17, 3, 40, 41, 42, 8, 0}, 6, 8, 2, 128));
  return c;
}

// Sequences of lengths 13 and 6 (GQA 4:2), their keys/values written into a scattered paged cache
// with kv_cache_write_decode; querying the last n tokens (n = 1, 4, all) equals those rows of
// attention_forward over the whole sequence.
TEST(AttentionDecode, paged_cache_equals_full_causal_attention) {
  const int64_t nq = 4, nkv = 2, hd = 6, bs = 4;
  const std::vector<int32_t> lens{13, 6};
  Context ctx = cpu_context(DType::f64);
  std::vector<Tensor> q, k, v, o_full;
  for (size_t s = 0; s < lens.size(); ++s) {
    q.push_back(random_tensor({1, lens[s], nq, hd}, DType::f64, 10 + s));
    k.push_back(random_tensor({1, lens[s], nkv, hd}, DType::f64, 20 + s));
    v.push_back(random_tensor({1, lens[s], nkv, hd}, DType::f64, 30 + s));
    o_full.push_back(Tensor::empty({1, lens[s], nq, hd}, DType::f64));
    Tensor lse = Tensor::empty({1, nq, lens[s]}, DType::f64);
    ops::attention_forward(ctx, q[s], k[s], v[s], o_full[s], lse);
  }
  const int64_t blocks = 8;
  int64_t M = 0;
  Tensor table = scattered_table(lens, bs, blocks, &M);
  Tensor kc = random_tensor({blocks, bs, nkv, hd}, DType::f64, 1), vc = random_tensor({blocks, bs, nkv, hd}, DType::f64, 2);
  for (size_t s = 0; s < lens.size(); ++s) {
    std::vector<int32_t> map;
    for (int32_t p = 0; p < lens[s]; ++p) map.push_back(table.data<int32_t>()[s * M + p / bs] * bs + p % bs);
    ops::kv_cache_write_decode(ctx, k[s].view({lens[s], nkv, hd}), i32_tensor(map), kc);
    ops::kv_cache_write_decode(ctx, v[s].view({lens[s], nkv, hd}), i32_tensor(map), vc);
  }
  for (int32_t n0 : {1, 4, 6}) {
    std::vector<int32_t> counts;
    for (int32_t L : lens) counts.push_back(std::min(n0, L));
    std::vector<int32_t> cu = offsets_of(counts);
    Tensor qn = Tensor::empty({cu.back(), nq, hd}, DType::f64), o = Tensor::empty({cu.back(), nq, hd}, DType::f64);
    for (size_t s = 0; s < lens.size(); ++s)
      qn.slice(cu[s], cu[s + 1]).copy_from(q[s].view({lens[s], nq, hd}).slice(lens[s] - counts[s], lens[s]));
    ops::attention_decode_forward(ctx, qn, kc, vc, {table, i32_tensor(cu), i32_tensor(lens)}, o);
    for (size_t s = 0; s < lens.size(); ++s)
      EXPECT_LT(relative_error(o.slice(cu[s], cu[s + 1]),
                               o_full[s].view({lens[s], nq, hd}).slice(lens[s] - counts[s], lens[s])),
                1e-14)
          << "sequence " << s << " with " << counts[s] << " new tokens";
  }
}

TEST(KvCacheWriteDecode, writes_the_named_rows_only) {
  Context ctx = cpu_context(DType::f64);
  Tensor cache = random_tensor({3, 2, 1, 2}, DType::f64, 1), before = cache.clone();
  Tensor src = random_tensor({2, 1, 2}, DType::f64, 2);
  ops::kv_cache_write_decode(ctx, src, i32_tensor({5, 2}), cache);
  std::vector<double> c = cache.to_f64_vector(), b = before.to_f64_vector(), s = src.to_f64_vector();
  for (int r = 0; r < 6; ++r)
    for (int e = 0; e < 2; ++e) {
      double want = r == 5 ? s[e] : r == 2 ? s[2 + e] : b[r * 2 + e];
      EXPECT_EQ(c[r * 2 + e], want) << "row " << r;
    }
  EXPECT_THROW(ops::kv_cache_write_decode(ctx, src, i32_tensor({6, 0}), cache), Error);
}

#if NEMOTRON_CUDA
// On CUDA the index tensors must be on the device with the data (the kernels read them there and
// the host never does): a host index tensor, or data on the host beside a CUDA cache, is refused
// with a message naming it.
TEST(KvCacheWriteDecode, cuda_refuses_tensors_on_another_device) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context ctx{&gpu, nullptr, DType::f32};
  Tensor cache = Tensor::zeros({2, 2, 1, 4}, DType::f32, gpu), src = random_tensor({1, 1, 4}, DType::f32, 1).to(gpu);
  EXPECT_THROW(ops::kv_cache_write_decode(ctx, src, i32_tensor({1}), cache), Error);
  const Tensor host_src = random_tensor({1, 1, 4}, DType::f32, 1);
  EXPECT_THROW(ops::kv_cache_write_decode(ctx, host_src, i32_on(ctx, {1}), cache), Error);
  ops::kv_cache_write_decode(ctx, src, i32_on(ctx, {3}), cache);
  std::vector<double> c = cache.to_f64_vector(), v = src.to_f64_vector();
  for (int e = 0; e < 4; ++e) EXPECT_EQ(c[12 + e], v[e]);
  for (int e = 0; e < 12; ++e) EXPECT_EQ(c[e], 0.0);
}
#endif

}  // namespace
}  // namespace nemotron::testing
