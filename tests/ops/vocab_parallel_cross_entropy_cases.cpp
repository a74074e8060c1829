// Vocab-parallel cross-entropy: a [N, V] problem split into T column shards runs stats -> a
// concatenated "all-gather" -> combine -> grad, as T tensor-parallel ranks would. The cases check
// the three stages together (fp64 finite differences of the loss through them, and each backend
// against the CPU float64 reference); the TESTs check them against the fused
// softmax_cross_entropy on the whole logits, on the CPU and (test_cuda) the GPU. Targets include
// ignored ones and ones on the first and last column of every shard.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/rng.h"
#include "harness.h"
#include "ops/cross_entropy.h"
#include "ops/vocab_parallel_cross_entropy.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace nemotron::testing {
namespace {

// Rank t of T holds global columns [shard_begin(t), shard_begin(t + 1)).
int64_t shard_begin(int64_t t, int64_t T, int64_t V) { return t * V / T; }

// The drawn targets, with rows put on shard boundaries (first and last column of each shard) and
// on the -100 that transformers uses for "ignore"; -1 already occurs among the drawn ones.
Tensor boundary_targets(Context& ctx, const Tensor& drawn, int64_t T, int64_t V) {
  std::vector<double> y = drawn.to_f64_vector();
  const int64_t N = static_cast<int64_t>(y.size());
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = (n / 4) % T;
    if (n % 4 == 0) y[n] = static_cast<double>(shard_begin(t, T, V));
    else if (n % 4 == 1) y[n] = static_cast<double>(shard_begin(t + 1, T, V) - 1);
    else if (n % 8 == 2) y[n] = -100;
  }
  return Tensor::from_vector<double>({N}, y).to_host(drawn.dtype()).to(*ctx.backend);
}

// Columns [begin, end) of a [N, V] tensor, as a contiguous [N, end - begin] tensor in its dtype on
// its device (the shard one rank holds).
Tensor columns(const Tensor& x, int64_t begin, int64_t end) {
  const int64_t N = x.dim(0), V = x.dim(1), W = end - begin;
  std::vector<double> all = x.to_f64_vector(), part(static_cast<size_t>(N * W));
  for (int64_t n = 0; n < N; ++n) std::copy_n(all.begin() + n * V + begin, W, part.begin() + n * W);
  return Tensor::from_vector<double>({N, W}, part).to_host(x.dtype()).to(x.backend());
}

// Stats of every shard gathered rank-major into [T, N, 3], then combined: what every rank holds
// after the all-gather. Returns {lse, losses}.
std::pair<Tensor, Tensor> sharded_loss(Context& ctx, const std::vector<Tensor>& shards,
                                       const std::vector<int64_t>& begins, const Tensor& targets, const Tensor& mask,
                                       int64_t V) {
  const int64_t T = static_cast<int64_t>(shards.size()), N = shards[0].dim(0);
  const DType st = stat_dtype(shards[0].dtype());
  Tensor gathered = ctx.empty({T, N, 3}, st);
  for (int64_t t = 0; t < T; ++t) {
    Tensor part = gathered.select(t);
    ops::vocab_shard_stats(ctx, shards[t], targets, begins[t], part, V);
  }
  Tensor lse = ctx.empty({N}, st), losses = ctx.empty({N}, st);
  ops::vocab_shard_combine(ctx, gathered, targets, mask, lse, losses);
  return {lse, losses};
}

struct Sharded {
  std::vector<Tensor> shards;
  std::vector<int64_t> begins;
};

Sharded split(const Tensor& logits, int64_t T) {
  const int64_t V = logits.dim(1);
  Sharded s;
  for (int64_t t = 0; t < T; ++t) {
    s.begins.push_back(shard_begin(t, T, V));
    s.shards.push_back(columns(logits, shard_begin(t, T, V), shard_begin(t + 1, T, V)));
  }
  return s;
}

// Each shard's gradient written back into its columns of a host float64 [N, V] tensor.
Tensor sharded_grad(Context& ctx, Sharded& s, const Tensor& targets, const Tensor& mask, const Tensor& lse,
                    double scale, int64_t N, int64_t V, bool in_place) {
  std::vector<double> full(static_cast<size_t>(N * V));
  for (size_t t = 0; t < s.shards.size(); ++t) {
    Tensor& x = s.shards[t];
    Tensor d = in_place ? x : ctx.empty(x.shape(), x.dtype());
    ops::vocab_shard_grad(ctx, x, targets, mask, lse, s.begins[t], scale, d);
    const int64_t W = x.dim(1);
    std::vector<double> g = d.to_f64_vector();
    for (int64_t n = 0; n < N; ++n) std::copy_n(g.begin() + n * W, W, full.begin() + n * V + s.begins[t]);
  }
  return Tensor::from_vector<double>({N, V}, full);
}

class VocabParallelCrossEntropyCase : public OpCase {
 public:
  enum class Mask { none, same, f32 };
  VocabParallelCrossEntropyCase(int64_t N, int64_t V, int64_t T, Mask mask, bool in_place = false,
                                DType target_dtype = DType::i32)
      : N_(N), V_(V), T_(T), mask_(mask), in_place_(in_place), target_dtype_(target_dtype) {}
  std::string op() const override { return "vocab_parallel_cross_entropy"; }
  std::string params() const override {
    static const char* names[] = {"none", "same", "f32"};
    return fmt::format("N={},V={},T={},mask={},in_place={},targets={}", N_, V_, T_,
                       names[static_cast<int>(mask_)], in_place_, dtype_name(target_dtype_));
  }
  bool grad_check() const override { return N_ * V_ <= 200000; }
  double fd_step() const override { return V_ >= 1000 ? 1e-3 : 1e-6; }
  std::vector<InputSpec> inputs() const override {
    std::vector<InputSpec> in{{"logits", {N_, V_}, DType::f64, true, -3.0, 3.0},
                              {"targets", {N_}, target_dtype_, false, -1.0, static_cast<double>(V_)}};
    if (mask_ != Mask::none) in.push_back({"mask", {N_}, DType::f64, false, 0.0, 1.0, mask_ == Mask::f32});
    return in;
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Sharded s = split(in[0], T_);
    Tensor y = boundary_targets(ctx, in[1], T_, V_);
    return {sharded_loss(ctx, s.shards, s.begins, y, mask(in), V_).second};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    // L = sum_n dout[n] * loss[n]: the gradient is linear in the mask, so dout joins it row by row.
    Sharded s = split(in[0], T_);
    Tensor y = boundary_targets(ctx, in[1], T_, V_);
    Tensor lse = sharded_loss(ctx, s.shards, s.begins, y, mask(in), V_).first;
    std::vector<double> a = douts[0].to_f64_vector();
    if (mask_ != Mask::none) {
      std::vector<double> b = in[2].to_f64_vector();
      for (int64_t n = 0; n < N_; ++n) a[n] *= b[n];
    }
    const DType mt = mask_ == Mask::f32 ? stat_dtype(in[0].dtype()) : in[0].dtype();
    Tensor m = Tensor::from_vector<double>({N_}, a).to_host(mt).to(*ctx.backend);
    std::vector<Tensor> g{sharded_grad(ctx, s, y, m, lse, 1.0, N_, V_, in_place_), Tensor()};
    if (mask_ != Mask::none) g.push_back(Tensor());
    return g;
  }

 private:
  Tensor mask(const std::vector<Tensor>& in) const { return mask_ == Mask::none ? Tensor() : in[2]; }
  int64_t N_, V_, T_;
  Mask mask_;
  bool in_place_;
  DType target_dtype_;
};

NM_OP_CASES(vocab_parallel_cross_entropy_cases) {
  CaseList c;
  using M = VocabParallelCrossEntropyCase::Mask;
  c.push_back(std::make_unique<VocabParallelCrossEntropyCase>(9, 12, 1, M::none));
  c.push_back(std::make_unique<VocabParallelCrossEntropyCase>(13, 37, 2, M::same, false, DType::i64));
  c.push_back(std::make_unique<VocabParallelCrossEntropyCase>(16, 40, 3, M::f32, true));  // uneven shards
  c.push_back(std::make_unique<VocabParallelCrossEntropyCase>(11, 1007, 4, M::same, true));
  c.push_back(std::make_unique<VocabParallelCrossEntropyCase>(8, 4096, 2, M::f32));  // 16-byte loads
  // A large shard (Vl = 65536) in place, as one rank of T = 2 over a 131072 vocabulary holds it.
  c.push_back(std::make_unique<VocabParallelCrossEntropyCase>(64, 131072, 2, M::f32, true));
  c.push_back(std::make_unique<VocabParallelCrossEntropyCase>(6, 50001, 3, M::none, true, DType::i64));  // odd widths
  return c;
}

// Sharded against fused on one backend and dtype: every T of 1..4, with a mask in the logits
// dtype, -1 and -100 targets, targets on shard edges; losses and dlogits.
void expect_shards_equal_fused(Context& ctx, DType dtype, double tol) {
  const int64_t N = 24, V = 1030;
  Tensor logits64 = Tensor::empty({N, V}, DType::f64);
  fill_uniform(logits64, Philox(11, 0), -4.0, 4.0);
  std::vector<double> mv(N);
  for (int64_t n = 0; n < N; ++n) mv[n] = 0.25 + 0.5 * static_cast<double>(n % 3);
  Tensor logits = logits64.to_host(dtype).to(*ctx.backend);
  Tensor mask = Tensor::from_vector<double>({N}, mv).to_host(dtype).to(*ctx.backend);
  std::vector<double> drawn(N);
  for (int64_t n = 0; n < N; ++n) drawn[n] = static_cast<double>((n * 389) % V);
  drawn[7] = -17;
  for (int64_t T = 1; T <= 4; ++T) {
    Tensor y = boundary_targets(ctx, Tensor::from_vector<double>({N}, drawn).to_host(DType::i64), T, V);
    const DType st = stat_dtype(dtype);
    Tensor want_loss = ctx.empty({N}, st), want_d = ctx.empty({N, V}, dtype);
    ops::softmax_cross_entropy(ctx, logits, y, mask, 0.5, want_loss, &want_d);
    Sharded s = split(logits, T);
    auto [lse, loss] = sharded_loss(ctx, s.shards, s.begins, y, mask, V);
    Tensor d = sharded_grad(ctx, s, y, mask, lse, 0.5, N, V, T % 2 == 0);
    EXPECT_LT(relative_error(loss, want_loss), tol) << "T=" << T << " " << dtype_name(dtype) << " losses";
    EXPECT_LT(relative_error(d, want_d), tol) << "T=" << T << " " << dtype_name(dtype) << " dlogits";
    std::vector<double> l = loss.to_f64_vector();
    for (int64_t n = 0; n < N; ++n) {
      if (n == 7 || n % 8 == 2) {
        EXPECT_EQ(l[n], 0.0) << "ignored row " << n << " T=" << T;
      }
    }
  }
}

TEST(VocabParallelCrossEntropy, shards_equal_fused_op_on_cpu) {
  Context c64 = cpu_context(DType::f64), c32 = cpu_context(DType::f32);
  expect_shards_equal_fused(c64, DType::f64, 1e-13);
  expect_shards_equal_fused(c32, DType::f32, 2e-6);
}

#if NEMOTRON_CUDA
TEST(VocabParallelCrossEntropy, shards_equal_fused_op_on_cuda) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context f32{&gpu, nullptr, DType::f32}, bf16{&gpu, nullptr, DType::bf16};
  expect_shards_equal_fused(f32, DType::f32, 2e-6);
  // Both compute in float32 from the same bf16 logits; dlogits round to bf16 on either side.
  expect_shards_equal_fused(bf16, DType::bf16, 4e-3);
}

// Device targets are checked by the stats kernel (a flag read back), host ones on the host.
TEST(VocabParallelCrossEntropy, target_beyond_the_vocabulary_on_the_device_is_an_input_error) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context ctx{&gpu, nullptr, DType::f32};
  Tensor logits = ctx.zeros({3, 4}, DType::f32), stats = ctx.empty({3, 3}, DType::f32);
  Tensor y = Tensor::from_vector<int64_t>({3}, {1, 7, 8}).to(gpu);
  ops::vocab_shard_stats(ctx, logits, y, 4, stats, 9);
  EXPECT_EQ(stats.to_f64_vector()[4], 4.0);  // row 1: s = the sum of 4 exps of 0
  try {
    ops::vocab_shard_stats(ctx, logits, y, 4, stats, 8);
    ADD_FAILURE() << "target 8 of a vocabulary of 8 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("label 8 at position 2"), std::string::npos) << e.what();
  }
}
#endif

TEST(VocabParallelCrossEntropy, target_beyond_the_vocabulary_is_an_input_error) {
  Context ctx = cpu_context(DType::f64);
  Tensor logits = Tensor::zeros({2, 4}, DType::f64), stats = Tensor::empty({2, 3}, DType::f64);
  Tensor y = Tensor::from_vector<int32_t>({2}, {1, 8});
  ops::vocab_shard_stats(ctx, logits, y, 4, stats);  // unchecked: 8 is simply not this rank's
  EXPECT_EQ(stats.data<double>()[5], 0.0);
  EXPECT_THROW(ops::vocab_shard_stats(ctx, logits, y, 4, stats, 8), InputError);
}

}  // namespace
}  // namespace nemotron::testing
