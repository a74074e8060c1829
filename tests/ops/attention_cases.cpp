// Causal GQA attention: gradients for q, k, v through the lse-recomputing backward, and the
// forward (o and lse) against a direct triple loop, including several query blocks (T > 64).
// Packed rows (seq_idx): the same checks with several sequences per row, and the proof that a
// packed row gives every sequence exactly what it gets alone, forward and backward.
// Queries of a sequence's tail (Tq < T keys, context parallelism): the same checks, and the proof
// that they give the tail rows of the whole-sequence call.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/rng.h"
#include "harness.h"
#include "ops/attention.h"
#include "packed_rows.h"
#if NEMOTRON_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#endif

namespace nemotron::testing {
namespace {

class AttentionCase : public OpCase {
 public:
  // Tq: query rows, the last Tq of the T keys' positions (0 = T).
  AttentionCase(int64_t B, int64_t T, int64_t nq, int64_t nkv, int64_t hd, PackedLayout packed = {}, int64_t Tq = 0)
      : B_(B), T_(T), Tq_(Tq > 0 ? Tq : T), nq_(nq), nkv_(nkv), hd_(hd), packed_(std::move(packed)) {}
  std::string op() const override { return "attention"; }
  std::string params() const override {
    return fmt::format("B={},T={},nq={},nkv={},hd={}{}{}", B_, T_, nq_, nkv_, hd_,
                       Tq_ == T_ ? "" : fmt::format(",Tq={}", Tq_),
                       packed_.empty() ? "" : ",packed=" + layout_str(packed_));
  }
  std::vector<InputSpec> inputs() const override {
    return {{"q", {B_, Tq_, nq_, hd_}, DType::f64, true, -2.0, 2.0},
            {"k", {B_, T_, nkv_, hd_}, DType::f64, true, -2.0, 2.0},
            {"v", {B_, T_, nkv_, hd_}}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor o, lse;
    run(ctx, in, o, lse);
    return {o};
  }
  std::vector<Tensor> backward(Context& ctx, const std::vector<Tensor>& in,
                               const std::vector<Tensor>& douts) const override {
    Tensor o, lse;
    run(ctx, in, o, lse);
    DType dt = in[0].dtype();
    Tensor dq = ctx.empty(in[0].shape(), dt), dk = ctx.empty(in[1].shape(), dt), dv = ctx.empty(in[2].shape(), dt);
    ops::attention_backward(ctx, in[0], in[1], in[2], o, lse, douts[0], dq, dk, dv, seq_idx(ctx));
    return {dq, dk, dv};
  }

 private:
  Tensor seq_idx(Context& ctx) const { return packed_.empty() ? Tensor() : seq_idx_tensor(ctx, packed_, T_); }
  void run(Context& ctx, const std::vector<Tensor>& in, Tensor& o, Tensor& lse) const {
    o = ctx.empty(in[0].shape(), in[0].dtype());
    lse = ctx.empty({B_, nq_, Tq_}, stat_dtype(in[0].dtype()));
    ops::attention_forward(ctx, in[0], in[1], in[2], o, lse, seq_idx(ctx));
  }
  int64_t B_, T_, Tq_, nq_, nkv_, hd_;
  PackedLayout packed_;
};

NM_OP_CASES(attention_cases) {
  CaseList c;
  c.push_back(std::make_unique<AttentionCase>(2, 5, 2, 1, 3));
  c.push_back(std::make_unique<AttentionCase>(3, 13, 4, 2, 8));
  c.push_back(std::make_unique<AttentionCase>(2, 9, 4, 1, 5));
  c.push_back(std::make_unique<AttentionCase>(2, 67, 2, 2, 4));  // two query blocks
  // CUDA tile shapes: head dims of the flash path (64, 128, and 40 padded to 64), T not a
  // multiple of the 64/128-row tiles, group 1 and group > 1.
  c.push_back(std::make_unique<AttentionCase>(2, 77, 2, 2, 64));
  c.push_back(std::make_unique<AttentionCase>(2, 130, 4, 2, 128));
  c.push_back(std::make_unique<AttentionCase>(2, 130, 3, 1, 64));
  c.push_back(std::make_unique<AttentionCase>(1, 200, 4, 4, 128));
  c.push_back(std::make_unique<AttentionCase>(2, 77, 6, 2, 40));
  // Packed rows: odd lengths, length-1 sequences, a row of one sequence next to a packed one.
  c.push_back(std::make_unique<AttentionCase>(2, 11, 2, 1, 3, PackedLayout{{1, 4, 1, 5}, {11}}));
  c.push_back(std::make_unique<AttentionCase>(2, 13, 4, 2, 8, PackedLayout{{3, 3, 7}, {1, 1, 1, 10}}));
  // Boundaries at and across the 64-row CPU query blocks and the CUDA tiles (64/128 rows).
  c.push_back(std::make_unique<AttentionCase>(2, 67, 2, 2, 4, PackedLayout{{64, 3}, {5, 59, 1, 2}}));
  c.push_back(std::make_unique<AttentionCase>(2, 150, 4, 2, 64, PackedLayout{{1, 63, 2, 62, 22}, {128, 1, 21}}));
  c.push_back(std::make_unique<AttentionCase>(1, 200, 4, 4, 128, PackedLayout{{37, 1, 90, 71, 1}}));
  c.push_back(std::make_unique<AttentionCase>(2, 77, 6, 2, 40, PackedLayout{{77}, {33, 44}}));
  // A sequence's tail of queries (context parallelism's chunks): offsets inside and across the
  // 64-row blocks and tiles, a tail of one row, packed rows whose sequences start before the tail.
  c.push_back(std::make_unique<AttentionCase>(2, 9, 2, 1, 3, PackedLayout{}, 4));
  c.push_back(std::make_unique<AttentionCase>(2, 150, 4, 2, 64, PackedLayout{}, 50));
  c.push_back(std::make_unique<AttentionCase>(2, 200, 4, 2, 128, PackedLayout{}, 64));
  c.push_back(std::make_unique<AttentionCase>(1, 131, 3, 1, 64, PackedLayout{}, 1));
  c.push_back(std::make_unique<AttentionCase>(2, 77, 6, 2, 40, PackedLayout{}, 30));
  c.push_back(std::make_unique<AttentionCase>(2, 150, 4, 2, 64, PackedLayout{{1, 63, 2, 62, 22}, {128, 1, 21}}, 70));
  c.push_back(std::make_unique<AttentionCase>(2, 13, 4, 2, 8, PackedLayout{{3, 3, 7}, {1, 1, 1, 10}}, 6));
  return c;
}

// THE proof for attention on packed rows: every sequence of a packed row gets the output and the
// q/k/v gradients it gets when it runs alone as a row of its own.
TEST(Attention, packed_row_equals_each_sequence_alone_f64) {
  const int64_t B = 2, T = 150, nq = 4, nkv = 2, hd = 6;
  const PackedLayout layout{{1, 63, 2, 5, 1, 78}, {70, 80}};
  Context ctx = cpu_context(DType::f64);
  auto random = [](Shape shape, uint64_t seed) {
    Tensor t = Tensor::empty(shape, DType::f64);
    fill_uniform(t, Philox(seed), -2, 2);
    return t;
  };
  Tensor q = random({B, T, nq, hd}, 1), k = random({B, T, nkv, hd}, 2), v = random({B, T, nkv, hd}, 3);
  Tensor dout = random({B, T, nq, hd}, 4);
  auto run = [&](const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& dout_, const Tensor& seq) {
    Tensor o = Tensor::empty(q_.shape(), DType::f64), lse = Tensor::empty({q_.dim(0), nq, q_.dim(1)}, DType::f64);
    ops::attention_forward(ctx, q_, k_, v_, o, lse, seq);
    Tensor dq = Tensor::empty(q_.shape(), DType::f64), dk = Tensor::empty(k_.shape(), DType::f64);
    Tensor dv = Tensor::empty(v_.shape(), DType::f64);
    ops::attention_backward(ctx, q_, k_, v_, o, lse, dout_, dq, dk, dv, seq);
    return std::vector<Tensor>{o, dq, dk, dv};
  };
  std::vector<Tensor> packed = run(q, k, v, dout, seq_idx_tensor(ctx, layout, T));
  const char* names[] = {"o", "dq", "dk", "dv"};
  int sequences = 0;
  for (size_t b = 0; b < layout.size(); ++b)
    for (auto [s, e] : spans(layout, b)) {
      std::vector<Tensor> alone = run(tokens(q, b, s, e).clone(), tokens(k, b, s, e).clone(),
                                      tokens(v, b, s, e).clone(), tokens(dout, b, s, e).clone(), Tensor());
      for (size_t i = 0; i < alone.size(); ++i)
        EXPECT_LT(relative_error(tokens(packed[i], b, s, e), alone[i]), 1e-12)
            << names[i] << " of row " << b << " tokens [" << s << ", " << e << ")";
      ++sequences;
    }
  EXPECT_EQ(sequences, 8);
  // And the mask matters: the same row without seq_idx differs in every sequence but the first.
  std::vector<Tensor> unpacked = run(q, k, v, dout, Tensor());
  EXPECT_GT(relative_error(tokens(unpacked[0], 0, 64, 66), tokens(packed[0], 0, 64, 66)), 1e-3);
}

// THE proof for a tail of queries: its outputs, lse and dq are the whole call's rows for those
// positions, and its dk/dv the whole call's with the output gradient zero before the tail.
TEST(Attention, query_tail_equals_the_whole_sequence_rows_f64) {
  const int64_t B = 2, T = 150, Tq = 61, nq = 4, nkv = 2, hd = 6, off = T - Tq;
  Context ctx = cpu_context(DType::f64);
  auto random = [](Shape shape, uint64_t seed) {
    Tensor t = Tensor::empty(shape, DType::f64);
    fill_uniform(t, Philox(seed), -2, 2);
    return t;
  };
  for (bool packed : {false, true}) {
    const Tensor seq = packed ? seq_idx_tensor(ctx, PackedLayout{{1, 63, 40, 46}, {100, 50}}, T) : Tensor();
    Tensor q = random({B, T, nq, hd}, 1), k = random({B, T, nkv, hd}, 2), v = random({B, T, nkv, hd}, 3);
    Tensor dout = random({B, T, nq, hd}, 4);
    for (int64_t b = 0; b < B; ++b) tokens(dout, b, 0, off).zero_();
    Tensor o = Tensor::empty(q.shape(), DType::f64), lse = Tensor::empty({B, nq, T}, DType::f64);
    ops::attention_forward(ctx, q, k, v, o, lse, seq);
    Tensor dq = Tensor::empty(q.shape(), DType::f64), dk = Tensor::empty(k.shape(), DType::f64);
    Tensor dv = Tensor::empty(v.shape(), DType::f64);
    ops::attention_backward(ctx, q, k, v, o, lse, dout, dq, dk, dv, seq);
    auto tail = [&](const Tensor& t) {
      Tensor out = Tensor::empty({B, Tq, t.dim(2), t.dim(3)}, DType::f64);
      for (int64_t b = 0; b < B; ++b) tokens(out, b, 0, Tq).copy_from(tokens(t, b, off, T));
      return out;
    };
    const Tensor qt = tail(q), dot = tail(dout);
    Tensor ot = Tensor::empty(qt.shape(), DType::f64), lt = Tensor::empty({B, nq, Tq}, DType::f64);
    ops::attention_forward(ctx, qt, k, v, ot, lt, seq);
    Tensor dqt = Tensor::empty(qt.shape(), DType::f64), dkt = Tensor::empty(k.shape(), DType::f64);
    Tensor dvt = Tensor::empty(v.shape(), DType::f64);
    ops::attention_backward(ctx, qt, k, v, ot, lt, dot, dqt, dkt, dvt, seq);
    EXPECT_LT(relative_error(ot, tail(o)), 1e-13) << "packed " << packed;
    EXPECT_LT(relative_error(dqt, tail(dq)), 1e-13) << "packed " << packed;
    EXPECT_LT(relative_error(dkt, dk), 1e-13) << "packed " << packed;
    EXPECT_LT(relative_error(dvt, dv), 1e-13) << "packed " << packed;
    double lse_err = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < nq; ++h)
        for (int64_t t = 0; t < Tq; ++t)
          lse_err = std::max(lse_err, std::fabs(lt.data<double>()[(b * nq + h) * Tq + t] -
                                                lse.data<double>()[(b * nq + h) * T + off + t]));
    EXPECT_LT(lse_err, 1e-12) << "packed " << packed;
  }
}

TEST(Attention, seq_idx_that_decreases_is_refused) {
  Context ctx = cpu_context(DType::f64);
  Tensor q = Tensor::zeros({1, 4, 1, 2}, DType::f64), k = Tensor::zeros({1, 4, 1, 2}, DType::f64);
  Tensor o = Tensor::empty(q.shape(), DType::f64), lse = Tensor::empty({1, 1, 4}, DType::f64);
  Tensor seq = Tensor::from_vector<int32_t>({1, 4}, {0, 1, 0, 2});
  EXPECT_THROW(ops::attention_forward(ctx, q, k, k, o, lse, seq), Error);
  Tensor wrong = Tensor::from_vector<int32_t>({1, 3}, {0, 0, 0});
  EXPECT_THROW(ops::attention_forward(ctx, q, k, k, o, lse, wrong), Error);
}

TEST(Attention, forward_matches_direct_loop_f64) {
  const int64_t B = 2, T = 70, nq = 6, nkv = 2, hd = 5;
  Tensor q = Tensor::empty({B, T, nq, hd}, DType::f64), k = Tensor::empty({B, T, nkv, hd}, DType::f64);
  Tensor v = Tensor::empty({B, T, nkv, hd}, DType::f64);
  fill_uniform(q, Philox(1, 0), -2, 2);
  fill_uniform(k, Philox(1, 1), -2, 2);
  fill_uniform(v, Philox(1, 2), -1, 1);
  Tensor o = Tensor::empty(q.shape(), DType::f64), lse = Tensor::empty({B, nq, T}, DType::f64);
  Context ctx = cpu_context(DType::f64);
  ops::attention_forward(ctx, q, k, v, o, lse);
  const double *Q = q.data<double>(), *Kp = k.data<double>(), *V = v.data<double>();
  double max_err = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < nq; ++h) {
      const int64_t j = h / (nq / nkv);  // KV head j serves query heads j*3 .. j*3+2
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(static_cast<size_t>(t + 1));
        double z = 0;
        for (int64_t r = 0; r <= t; ++r) {
          double dot = 0;
          for (int64_t c = 0; c < hd; ++c) dot += Q[((b * T + t) * nq + h) * hd + c] * Kp[((b * T + r) * nkv + j) * hd + c];
          s[r] = std::exp(dot / std::sqrt(double(hd)));
          z += s[r];
        }
        max_err = std::max(max_err, std::fabs(lse.data<double>()[(b * nq + h) * T + t] - std::log(z)));
        for (int64_t c = 0; c < hd; ++c) {
          double want = 0;
          for (int64_t r = 0; r <= t; ++r) want += s[r] / z * V[((b * T + r) * nkv + j) * hd + c];
          max_err = std::max(max_err, std::fabs(o.data<double>()[((b * T + t) * nq + h) * hd + c] - want));
        }
      }
    }
  EXPECT_LT(max_err, 1e-12);
}

#if NEMOTRON_CUDA
// Outputs start as NaN bytes, so an element a kernel forgets to write fails; two backward runs
// must agree bit for bit (no atomics). Shapes hit the flash path with the dK/dV head split
// (nkv = 2) and tails, and the simt path; the last two run packed rows (seq_idx), whose block
// skipping must still write every row.
TEST(Attention, cuda_writes_every_output_and_backward_is_deterministic) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  cuda::CudaBackend gpu(0);
  struct Shape5 { int64_t B, T, nq, nkv, hd; DType dt; PackedLayout packed; int64_t Tq = 0; };
  for (const Shape5& c : {Shape5{2, 130, 8, 2, 128, DType::bf16, {}}, Shape5{1, 77, 4, 1, 64, DType::bf16, {}},
                          Shape5{2, 77, 4, 2, 40, DType::f32, {}},
                          Shape5{2, 200, 8, 2, 128, DType::bf16, {{1, 70, 129}, {130, 1, 69}}},
                          Shape5{1, 150, 4, 2, 40, DType::f32, {{64, 1, 85}}},
                          Shape5{2, 200, 8, 2, 128, DType::bf16, {}, 70},
                          Shape5{2, 200, 8, 2, 64, DType::bf16, {{1, 70, 129}, {130, 1, 69}}, 100}}) {
    const int64_t Tq = c.Tq > 0 ? c.Tq : c.T;
    Context ctx{&gpu, nullptr, c.dt};
    const Tensor seq = c.packed.empty() ? Tensor() : seq_idx_tensor(ctx, c.packed, c.T);
    auto random = [&](Shape shape, uint64_t seed) {
      Tensor t = Tensor::empty(shape, DType::f64);
      fill_uniform(t, Philox(seed), -1, 1);
      return t.to_host(c.dt).to(gpu);
    };
    auto poisoned = [&](Shape shape, DType dt) {
      Tensor t = ctx.empty(shape, dt);
      EXPECT_EQ(cudaMemsetAsync(t.raw(), 0xff, t.nbytes(), gpu.stream()), cudaSuccess);
      return t;
    };
    auto finite = [](const Tensor& t) {
      for (double x : t.to_f64_vector())
        if (!std::isfinite(x)) return false;
      return true;
    };
    Tensor q = random({c.B, Tq, c.nq, c.hd}, 1), k = random({c.B, c.T, c.nkv, c.hd}, 2);
    Tensor v = random({c.B, c.T, c.nkv, c.hd}, 3), dout = random({c.B, Tq, c.nq, c.hd}, 4);
    Tensor o = poisoned(q.shape(), c.dt), lse = poisoned({c.B, c.nq, Tq}, DType::f32);
    ops::attention_forward(ctx, q, k, v, o, lse, seq);
    EXPECT_TRUE(finite(o) && finite(lse)) << "forward left elements unwritten, T=" << c.T << " hd=" << c.hd;
    std::vector<std::vector<double>> first;
    for (int run = 0; run < 2; ++run) {
      Tensor dq = poisoned(q.shape(), c.dt), dk = poisoned(k.shape(), c.dt), dv = poisoned(v.shape(), c.dt);
      ops::attention_backward(ctx, q, k, v, o, lse, dout, dq, dk, dv, seq);
      EXPECT_TRUE(finite(dq) && finite(dk) && finite(dv)) << "backward left elements unwritten, hd=" << c.hd;
      std::vector<std::vector<double>> got{dq.to_f64_vector(), dk.to_f64_vector(), dv.to_f64_vector()};
      if (run == 0) first = got;
      else EXPECT_TRUE(got == first) << "backward not bitwise reproducible, hd=" << c.hd;
    }
  }
}
#endif

}  // namespace
}  // namespace nemotron::testing
