// Embedding lookup: gradient for the table (grad_dtype, accumulated), with repeated ids in the
// batch; the large-N cases run the CUDA sort's global merge stages. The range form (a vocabulary
// split over T tensor-parallel ranks): each rank's partial output (zero rows for other ranks'
// ids) and its table gradient; summed over ranks they equal the whole-vocabulary op.
#include <gtest/gtest.h>

#include "case_buffers.h"
#include "core/host_waits.h"
#include "core/rng.h"
#include "harness.h"
#if NEMOTRON_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "ops/embedding.h"

namespace nemotron::testing {
namespace {

class EmbeddingCase : public OpCase {
 public:
  EmbeddingCase(int64_t N, int64_t V, int64_t D, DType id_dtype) : N_(N), V_(V), D_(D), id_dtype_(id_dtype) {}
  std::string op() const override { return "embedding"; }
  std::string params() const override { return fmt::format("N={},V={},D={},ids={}", N_, V_, D_, dtype_name(id_dtype_)); }
  std::vector<InputSpec> inputs() const override {
    return {{"ids", {N_}, id_dtype_, false, 0, static_cast<double>(V_)}, {"weight", {V_, D_}}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor y = ctx.empty({N_, D_}, in[1].dtype());
    ops::embedding_forward(ctx, in[0], in[1], y);
    return {y};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    // dw starts non-zero: the backward accumulates (+=) into what is there.
    Tensor dw = in[1].to_host(DType::f64).to_host(grad_dtype(in[1].dtype())).to(*ctx.backend);
    ops::embedding_backward(ctx, in[0], douts[0], dw);
    std::vector<double> a = dw.to_f64_vector(), w = in[1].to_f64_vector();
    for (size_t i = 0; i < a.size(); ++i) a[i] -= w[i];
    return {Tensor(), Tensor::from_vector<double>({V_, D_}, a)};
  }

 private:
  int64_t N_, V_, D_;
  DType id_dtype_;
};

// Rank t of T holds rows [t * V / T, (t + 1) * V / T) of the table.
int64_t shard_begin(int64_t t, int64_t T, int64_t V) { return t * V / T; }

class EmbeddingRangeCase : public OpCase {
 public:
  EmbeddingRangeCase(int64_t N, int64_t V, int64_t D, int64_t T, DType id_dtype)
      : N_(N), V_(V), D_(D), T_(T), id_dtype_(id_dtype) {}
  std::string op() const override { return "embedding_range"; }
  // The large cases exist for the CUDA sort; embedding's own cases check these sizes' gradient.
  bool grad_check() const override { return N_ <= 1000; }
  std::string params() const override {
    return fmt::format("N={},V={},D={},T={},ids={}", N_, V_, D_, T_, dtype_name(id_dtype_));
  }
  std::vector<InputSpec> inputs() const override {
    return {{"ids", {N_}, id_dtype_, false, 0, static_cast<double>(V_)}, {"weight", {V_, D_}}};
  }
  // One output per rank: its partial y (poisoned first, so rows it must zero are checked too).
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    std::vector<Tensor> ys;
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t b = shard_begin(t, T_, V_), e = shard_begin(t + 1, T_, V_);
      Tensor y = poisoned(ctx, {N_, D_}, in[1].dtype());
      ops::embedding_forward_range(ctx, in[0], in[1].slice(b, e), b, V_, y);
      ys.push_back(y);
    }
    return ys;
  }
  // Rank t's table gradient gets rank t's output gradient; the ranks' rows are stacked back.
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    std::vector<double> dw;
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t b = shard_begin(t, T_, V_), e = shard_begin(t + 1, T_, V_);
      Tensor g = grad_buffer(ctx, {e - b, D_}, in[1].dtype());
      ops::embedding_backward_range(ctx, in[0], douts[t], b, g);
      std::vector<double> part = accumulated(g).to_f64_vector();
      dw.insert(dw.end(), part.begin(), part.end());
    }
    return {Tensor(), Tensor::from_vector<double>({V_, D_}, dw)};
  }

 private:
  int64_t N_, V_, D_, T_;
  DType id_dtype_;
};

NM_OP_CASES(embedding_cases) {
  CaseList c;
  c.push_back(std::make_unique<EmbeddingCase>(23, 7, 5, DType::i32));  // N > V: ids repeat
  c.push_back(std::make_unique<EmbeddingCase>(9, 31, 12, DType::i64));
  c.push_back(std::make_unique<EmbeddingCase>(37, 1007, 45, DType::i32));
  c.push_back(std::make_unique<EmbeddingCase>(5000, 53, 19, DType::i64));  // sort beyond one block
  c.push_back(std::make_unique<EmbeddingCase>(3001, 4099, 130, DType::i32));
  c.push_back(std::make_unique<EmbeddingRangeCase>(23, 7, 5, 2, DType::i32));
  c.push_back(std::make_unique<EmbeddingRangeCase>(40, 31, 12, 3, DType::i64));  // uneven ranks
  c.push_back(std::make_unique<EmbeddingRangeCase>(5000, 53, 19, 4, DType::i64));
  c.push_back(std::make_unique<EmbeddingRangeCase>(3001, 4099, 130, 2, DType::i32));
  return c;
}

TEST(Embedding, out_of_range_id_names_its_position) {
  Context ctx = cpu_context(DType::f64);
  Tensor w = Tensor::zeros({5, 3}, DType::f64), y = Tensor::empty({3, 3}, DType::f64);
  Tensor ids = Tensor::from_vector<int32_t>({3}, {0, 5, 1});
  EXPECT_THROW(ops::embedding_forward(ctx, ids, w, y), InputError);
  EXPECT_THROW(ops::embedding_backward(ctx, ids, y, w), InputError);
  EXPECT_THROW(ops::embedding_backward_prechecked(ctx, ids, y, w), InputError);  // the CPU still checks
}

// The range op summed over T ranks equals the whole-vocabulary op, forward and backward (on the
// CPU in float64; the cases above compare each backend's ranks against this reference).
TEST(EmbeddingRange, summed_over_ranks_equals_whole_vocabulary) {
  Context ctx = cpu_context(DType::f64);
  const int64_t N = 50, V = 17, D = 6;
  std::vector<int32_t> idv(N);
  for (int64_t n = 0; n < N; ++n) idv[n] = static_cast<int32_t>((n * 7) % V);
  Tensor ids = Tensor::from_vector<int32_t>({N}, idv);
  Tensor w = Tensor::empty({V, D}, DType::f64), dy = Tensor::empty({N, D}, DType::f64);
  fill_uniform(w, Philox(3, 0), -1.0, 1.0);
  fill_uniform(dy, Philox(3, 1), -1.0, 1.0);
  Tensor want_y = Tensor::empty({N, D}, DType::f64), want_dw = Tensor::zeros({V, D}, DType::f64);
  ops::embedding_forward(ctx, ids, w, want_y);
  ops::embedding_backward(ctx, ids, dy, want_dw);
  for (int64_t T = 1; T <= 4; ++T) {
    Tensor sum = Tensor::zeros({N, D}, DType::f64), dw = Tensor::zeros({V, D}, DType::f64);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t b = shard_begin(t, T, V), e = shard_begin(t + 1, T, V);
      Tensor y = Tensor::empty({N, D}, DType::f64), dw_t = dw.slice(b, e);
      ops::embedding_forward_range(ctx, ids, w.slice(b, e), b, V, y);
      for (int64_t i = 0; i < N * D; ++i) sum.data<double>()[i] += y.data<double>()[i];
      ops::embedding_backward_range(ctx, ids, dy, b, dw_t);
    }
    EXPECT_EQ(sum.to_f64_vector(), want_y.to_f64_vector()) << "T=" << T;
    EXPECT_EQ(dw.to_f64_vector(), want_dw.to_f64_vector()) << "T=" << T;
  }
  Tensor bad = Tensor::from_vector<int32_t>({2}, {3, 17}), y2 = Tensor::empty({2, D}, DType::f64);
  EXPECT_THROW(ops::embedding_forward_range(ctx, bad, w.slice(0, 9), 0, V, y2), InputError);  // 17 >= V
  Tensor neg = Tensor::from_vector<int32_t>({2}, {3, -1});
  Tensor dw_rows = Tensor::zeros({V - 9, D}, DType::f64);
  EXPECT_THROW(ops::embedding_backward_range(ctx, neg, y2, 9, dw_rows), InputError);
}

#if NEMOTRON_CUDA
// Device ids are checked by the kernels: against the vocabulary in the forward (an id of another
// rank is no error), and only their sign in the range backward.
TEST(EmbeddingRange, device_ids_outside_the_vocabulary_name_their_position) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context ctx{&gpu, nullptr, DType::f32};
  Tensor w = ctx.zeros({4, 8}, DType::f32), y = ctx.empty({3, 8}, DType::f32), dw = ctx.zeros({4, 8}, DType::f32);
  Tensor ok = Tensor::from_vector<int32_t>({3}, {0, 5, 11}).to(gpu);
  Tensor bad = Tensor::from_vector<int32_t>({3}, {0, 12, 1}).to(gpu);
  ops::embedding_forward_range(ctx, ok, w, 4, 12, y);
  ops::embedding_backward_range(ctx, ok, y, 4, dw);
  try {
    ops::embedding_forward_range(ctx, bad, w, 4, 12, y);
    ADD_FAILURE() << "id 12 of a vocabulary of 12 was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("token id 12 at position 1"), std::string::npos) << e.what();
  }
  Tensor neg = Tensor::from_vector<int32_t>({3}, {0, 5, -3}).to(gpu);
  EXPECT_THROW(ops::embedding_backward_range(ctx, neg, y, 4, dw), InputError);
}

// The prechecked backward (the training step's: its forward checked the ids) gives the checked
// backward's gradient bit for bit and never waits for the stream; the checked one waits once.
TEST(Embedding, prechecked_backward_matches_and_does_not_wait) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  Context ctx{&gpu, nullptr, DType::f32};
  const int64_t N = 3001, V = 257, D = 40;
  std::vector<int32_t> idv(N);
  for (int64_t n = 0; n < N; ++n) idv[n] = static_cast<int32_t>((n * 31 + 7) % V);
  Tensor ids = Tensor::from_vector<int32_t>({N}, idv).to(gpu);
  Tensor dy = Tensor::empty({N, D}, DType::f32);
  fill_uniform(dy, Philox(5, 0), -1.0, 1.0);
  dy = dy.to(gpu);
  for (int64_t T : {1, 2}) {  // whole table, then rank 1 of a two-way vocabulary split
    const int64_t b = shard_begin(T - 1, T, V), e = shard_begin(T, T, V);
    Tensor want = ctx.zeros({e - b, D}, DType::f32), got = ctx.zeros({e - b, D}, DType::f32);
    const int64_t before = host_waits();
    if (T == 1) ops::embedding_backward(ctx, ids, dy, want);
    else ops::embedding_backward_range(ctx, ids, dy, b, want);
    EXPECT_EQ(host_waits() - before, 1) << "T=" << T;
    const int64_t mid = host_waits();
    if (T == 1) ops::embedding_backward_prechecked(ctx, ids, dy, got);
    else ops::embedding_backward_range(ctx, ids, dy, b, got, /*prechecked=*/true);
    EXPECT_EQ(host_waits(), mid) << "T=" << T;
    EXPECT_EQ(got.to_f64_vector(), want.to_f64_vector()) << "T=" << T;
  }
}
#endif

}  // namespace
}  // namespace nemotron::testing
