// Context parallelism's scan-state pieces (ops/context_scan_states.h): chunk_decay against its
// CPU reference, and the forward composition and its adjoint for every rank of C = 1, 2, 4 with
// and without packed rows (sequences starting inside a chunk and exactly at a chunk's start).
// Both are linear maps with no backward of their own (the scan's backward is the adjoint), so the
// cases compare outputs only; a CPU test pins the composition to the chained scan it replaces.
#include <gtest/gtest.h>

#include <cmath>

#include "case_buffers.h"
#include "core/rng.h"
#include "harness.h"
#include "ops/context_scan_states.h"
#include "ops/ssd_scan.h"

namespace nemotron::testing {
namespace {

class ChunkDecayCase : public OpCase {
 public:
  ChunkDecayCase(int64_t R, int64_t L, int64_t nH) : R_(R), L_(L), nH_(nH) {}
  std::string op() const override { return "chunk_decay"; }
  std::string params() const override { return fmt::format("R={},L={},nH={}", R_, L_, nH_); }
  std::vector<InputSpec> inputs() const override {
    return {{"dt", {R_, L_, nH_}, DType::f64, false, 0.001, 0.05, true}, {"A", {nH_}, DType::f64, false, -2.0, -0.5, true}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    Tensor decay = poisoned(ctx, {R_, nH_}, in[0].dtype());
    ops::chunk_decay(ctx, in[0], in[1], decay);
    return {decay};
  }
  bool has_backward() const override { return false; }

 private:
  int64_t R_, L_, nH_;
};

// Row b's packed-sequence ids over the whole sequence of 2C chunks of L tokens, cut into the
// gathered layout [C, 2B, L] (rank q's local rows 2b, 2b+1 = chunks q, 2C-1-q). `starts`: the
// positions where a new sequence starts (row-independent here, shifted by b to differ per row).
Tensor gathered_seq(Context& ctx, int64_t C, int64_t B, int64_t L, const std::vector<int64_t>& starts) {
  std::vector<int32_t> v(static_cast<size_t>(C * 2 * B * L));
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int32_t> row(static_cast<size_t>(2 * C * L), 0);
    for (int64_t t = 1; t < 2 * C * L; ++t) {
      bool start = false;
      for (int64_t s : starts) start = start || t == (s + b) % (2 * C * L);
      row[t] = row[t - 1] + (start ? 1 : 0);
    }
    for (int64_t q = 0; q < C; ++q)
      for (int j = 0; j < 2; ++j) {
        const int64_t g = j == 0 ? q : 2 * C - 1 - q;
        for (int64_t t = 0; t < L; ++t) v[static_cast<size_t>(((q * 2 * B) + 2 * b + j) * L + t)] = row[g * L + t];
      }
  }
  return Tensor::from_vector<int32_t>({C, 2 * B, L}, v).to(*ctx.backend);
}

class ContextStatesCase : public OpCase {
 public:
  ContextStatesCase(int64_t C, int64_t B, int64_t nH, int64_t P, int64_t N, int64_t L, std::vector<int64_t> starts)
      : C_(C), B_(B), nH_(nH), P_(P), N_(N), L_(L), starts_(std::move(starts)) {}
  std::string op() const override { return "context_states"; }
  std::string params() const override {
    std::string s;
    for (int64_t x : starts_) s += fmt::format("{}{}", s.empty() ? "" : "/", x);
    return fmt::format("C={},B={},nH={},P={},N={},L={}{}", C_, B_, nH_, P_, N_, L_, s.empty() ? "" : ",starts=" + s);
  }
  std::vector<InputSpec> inputs() const override {
    const Shape states{C_, 2 * B_, nH_, P_, N_};
    return {{"F", states, DType::f64, false, -1.0, 1.0, true},
            {"decay", {C_, 2 * B_, nH_}, DType::f64, false, 0.2, 1.0, true},
            {"d0", states, DType::f64, false, -1.0, 1.0, true}};
  }
  // Every rank's incoming states and final-state gradients, rank after rank.
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    const Tensor seq = starts_.empty() ? Tensor() : gathered_seq(ctx, C_, B_, L_, starts_);
    std::vector<Tensor> out;
    for (int r = 0; r < C_; ++r) {
      Tensor s = poisoned(ctx, {2 * B_, nH_, P_, N_}, in[0].dtype()), df = poisoned(ctx, s.shape(), in[0].dtype());
      ops::context_states_forward(ctx, in[0], in[1], seq, r, s);
      ops::context_states_backward(ctx, in[2], in[1], seq, r, df);
      out.push_back(s);
      out.push_back(df);
    }
    return out;
  }
  bool has_backward() const override { return false; }

 private:
  int64_t C_, B_, nH_, P_, N_, L_;
  std::vector<int64_t> starts_;
};

NM_OP_CASES(context_scan_states_cases) {
  CaseList c;
  c.push_back(std::make_unique<ChunkDecayCase>(4, 9, 3));
  c.push_back(std::make_unique<ChunkDecayCase>(8, 300, 24));  // several strides of a warp
  c.push_back(std::make_unique<ContextStatesCase>(1, 2, 2, 3, 4, 5, std::vector<int64_t>{}));
  c.push_back(std::make_unique<ContextStatesCase>(2, 2, 3, 4, 5, 6, std::vector<int64_t>{}));
  c.push_back(std::make_unique<ContextStatesCase>(4, 3, 2, 8, 16, 4, std::vector<int64_t>{}));
  // Packed: a start inside chunk 1, one exactly at chunk 3's first token (row 0), and later ones.
  c.push_back(std::make_unique<ContextStatesCase>(2, 2, 3, 4, 5, 6, std::vector<int64_t>{8, 18}));
  c.push_back(std::make_unique<ContextStatesCase>(4, 3, 2, 8, 16, 4, std::vector<int64_t>{5, 12, 13, 27}));
  return c;
}

// The composition is the scan it replaces: scanning each of the 2C chunks of a row from the
// incoming state the op composes (from the chunks' own zero-state final states and decays) gives
// the whole row's scan, output for output, with and without packed rows.
TEST(ContextScanStates, chunks_from_composed_states_equal_the_whole_scan_f64) {
  const int64_t C = 3, B = 2, L = 7, T = 2 * C * L, nH = 2, G = 1, P = 3, N = 4;
  Context ctx = cpu_context(DType::f64);
  auto random = [](Shape shape, uint64_t seed, double lo, double hi) {
    Tensor t = Tensor::empty(shape, DType::f64);
    fill_uniform(t, Philox(seed), lo, hi);
    return t;
  };
  for (bool packed : {false, true}) {
    Tensor x = random({B, T, nH, P}, 1, -1, 1), dt = random({B, T, nH}, 2, 0.05, 0.5);
    Tensor A = random({nH}, 3, -1.5, -0.5), Bm = random({B, T, G, N}, 4, -1, 1), Cm = random({B, T, G, N}, 5, -1, 1);
    Tensor D = random({nH}, 6, -1, 1);
    const std::vector<int64_t> starts{9, 14, 30};  // inside chunk 1, at chunk 2's start, inside chunk 4
    Tensor seq_whole;
    if (packed) {
      std::vector<int32_t> ids(static_cast<size_t>(B * T));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 1; t < T; ++t) {
          bool start = false;
          for (int64_t s : starts) start = start || t == (s + b) % T;
          ids[static_cast<size_t>(b * T + t)] = ids[static_cast<size_t>(b * T + t - 1)] + (start ? 1 : 0);
        }
      seq_whole = Tensor::from_vector<int32_t>({B, T}, ids);
    }
    Tensor y_whole = Tensor::empty(x.shape(), DType::f64);
    ops::ssd_scan_forward(ctx, {x, dt, A, Bm, Cm, D, Tensor(), 4, seq_whole}, y_whole);
    // Every chunk as its own row: [B, 2C, L, ...] -> [B 2C, L, ...] (sequence order).
    auto chunks = [&](const Tensor& t) { std::vector<int64_t> d = t.shape().dims(); d[0] = B * 2 * C; d[1] = L;
                                          return t.view(Shape(d)); };
    ops::SsdScanArgs per_chunk{chunks(x), chunks(dt), A, chunks(Bm), chunks(Cm), D, Tensor(), 4,
                               packed ? chunks(seq_whole) : Tensor()};
    Tensor y0 = Tensor::empty(per_chunk.x.shape(), DType::f64), F = Tensor::empty({B * 2 * C, nH, P, N}, DType::f64);
    ops::ssd_scan_forward(ctx, per_chunk, y0, &F);
    Tensor decay = Tensor::empty({B * 2 * C, nH}, DType::f64);
    ops::chunk_decay(ctx, per_chunk.dt, A, decay);
    // Rearrange [B, 2C, ...] (chunk g of row b) into the gathered layout [C, 2B, ...].
    auto gathered = [&](const Tensor& t, int64_t per) {
      std::vector<double> src = t.to_f64_vector(), dst(src.size());
      for (int64_t b = 0; b < B; ++b)
        for (int64_t g = 0; g < 2 * C; ++g) {
          const int64_t q = g < C ? g : 2 * C - 1 - g, j = g < C ? 0 : 1;
          std::copy_n(src.begin() + (b * 2 * C + g) * per, per, dst.begin() + ((q * 2 * B) + 2 * b + j) * per);
        }
      return dst;
    };
    Tensor Fg = Tensor::from_vector<double>({C, 2 * B, nH, P, N}, gathered(F, nH * P * N));
    Tensor Dg = Tensor::from_vector<double>({C, 2 * B, nH}, gathered(decay, nH));
    Tensor seq_g = packed ? gathered_seq(ctx, C, B, L, starts) : Tensor();
    double err = 0;
    for (int r = 0; r < C; ++r) {
      Tensor s = Tensor::empty({2 * B, nH, P, N}, DType::f64);
      ops::context_states_forward(ctx, Fg, Dg, seq_g, r, s);
      for (int64_t b = 0; b < B; ++b)
        for (int j = 0; j < 2; ++j) {
          const int64_t g = j == 0 ? r : 2 * C - 1 - r, row = b * 2 * C + g;
          ops::SsdScanArgs one{per_chunk.x.slice(row, row + 1), per_chunk.dt.slice(row, row + 1), A,
                               per_chunk.Bm.slice(row, row + 1), per_chunk.Cm.slice(row, row + 1), D,
                               s.slice(2 * b + j, 2 * b + j + 1).clone(), 4,
                               packed ? per_chunk.seq_idx.slice(row, row + 1) : Tensor()};
          Tensor y = Tensor::empty(one.x.shape(), DType::f64);
          ops::ssd_scan_forward(ctx, one, y);
          const std::vector<double> got = y.to_f64_vector();
          const std::vector<double> want = y_whole.view({B * T, nH * P}).slice(b * T + g * L, b * T + g * L + L)
                                               .clone().to_f64_vector();
          for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i]));
        }
    }
    EXPECT_LT(err, 1e-12) << "packed " << packed;
  }
}

}  // namespace
}  // namespace nemotron::testing
