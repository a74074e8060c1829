// The chunked SSD scan (A.3.3) computes the same function as the sequential recurrence (A.3.2
// step 5): outputs and final states agree in float64 for every chunk size, ragged last chunks,
// several groups, with and without an initial state. The chunked backward does not depend on the
// chunk size either.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "harness.h"
#include "ops/ssd_scan.h"

namespace nemotron::testing {
namespace {

struct ScanShape {
  int64_t B, T, nH, P, G, N;
};

Tensor uniform(Shape shape, uint64_t stream, double lo, double hi) {
  Tensor t = Tensor::empty(std::move(shape), DType::f64);
  fill_uniform(t, Philox(20240611, stream), lo, hi);
  return t;
}

ops::SsdScanArgs random_args(const ScanShape& s, bool with_state) {
  ops::SsdScanArgs a;
  a.x = uniform({s.B, s.T, s.nH, s.P}, 1, -1, 1);
  a.dt = uniform({s.B, s.T, s.nH}, 2, 0.01, 0.9);
  a.A = uniform({s.nH}, 3, -2.0, -0.1);
  a.Bm = uniform({s.B, s.T, s.G, s.N}, 4, -1, 1);
  a.Cm = uniform({s.B, s.T, s.G, s.N}, 5, -1, 1);
  a.D = uniform({s.nH}, 6, 0.5, 1.5);
  if (with_state) a.initial_state = uniform({s.B, s.nH, s.P, s.N}, 7, -1, 1);
  return a;
}

void expect_chunked_equals_naive(const ScanShape& s, bool with_state) {
  Context ctx = cpu_context(DType::f64);
  ops::SsdScanArgs a = random_args(s, with_state);
  Tensor y_ref = Tensor::empty(a.x.shape(), DType::f64), fs_ref = Tensor::empty({s.B, s.nH, s.P, s.N}, DType::f64);
  ops::ssd_scan_naive_forward(ctx, a, y_ref, &fs_ref);
  for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{16}, s.T + 5}) {
    a.chunk_size = chunk;
    Tensor y = Tensor::empty(a.x.shape(), DType::f64), fs = Tensor::empty(fs_ref.shape(), DType::f64);
    ops::ssd_scan_forward(ctx, a, y, &fs);
    EXPECT_LT(relative_error(y, y_ref), 1e-10) << "y, chunk " << chunk << ", T " << s.T;
    EXPECT_LT(relative_error(fs, fs_ref), 1e-10) << "final state, chunk " << chunk << ", T " << s.T;
  }
}

TEST(SsdScan, chunked_equals_naive_recurrence_f64) {
  expect_chunked_equals_naive({2, 37, 4, 5, 2, 6}, false);  // 37 = 2*16 + 5 = 12*3 + 1
  expect_chunked_equals_naive({1, 20, 6, 3, 3, 4}, false);  // G = 3, chunk 16 leaves 4
}

TEST(SsdScan, chunked_equals_naive_recurrence_with_initial_state_f64) {
  expect_chunked_equals_naive({2, 37, 4, 5, 2, 6}, true);
  expect_chunked_equals_naive({3, 7, 2, 4, 1, 5}, true);   // T < 16: one short chunk
}

TEST(SsdScan, zero_initial_state_equals_no_initial_state) {
  Context ctx = cpu_context(DType::f64);
  ScanShape s{2, 9, 4, 3, 2, 4};
  ops::SsdScanArgs a = random_args(s, false), b = a;
  a.chunk_size = b.chunk_size = 4;
  b.initial_state = Tensor::zeros({s.B, s.nH, s.P, s.N}, DType::f64);
  Tensor ya = Tensor::empty(a.x.shape(), DType::f64), yb = Tensor::empty(a.x.shape(), DType::f64);
  ops::ssd_scan_forward(ctx, a, ya);
  ops::ssd_scan_forward(ctx, b, yb);
  EXPECT_EQ(ya.to_f64_vector(), yb.to_f64_vector());
}

// Splitting a sequence in two and feeding the first half's final state into the second half gives
// the full sequence's outputs: the hook a prefill/decode engine relies on.
TEST(SsdScan, state_carries_across_split_sequences) {
  Context ctx = cpu_context(DType::f64);
  ScanShape s{2, 13, 4, 3, 2, 5};
  ops::SsdScanArgs full = random_args(s, true);
  full.chunk_size = 4;
  Tensor y = Tensor::empty(full.x.shape(), DType::f64), fs = Tensor::empty({s.B, s.nH, s.P, s.N}, DType::f64);
  ops::ssd_scan_forward(ctx, full, y, &fs);
  auto part = [&](const Tensor& t, int64_t t0, int64_t t1) {  // tokens [t0, t1) of a [B, T, ...] tensor
    std::vector<int64_t> dims = t.shape().dims();
    int64_t inner = t.numel() / (dims[0] * dims[1]);
    dims[1] = t1 - t0;
    Tensor out = Tensor::empty(Shape(dims), DType::f64);
    for (int64_t b = 0; b < dims[0]; ++b)
      std::copy(t.data<double>() + (b * s.T + t0) * inner, t.data<double>() + (b * s.T + t1) * inner,
                out.data<double>() + b * (t1 - t0) * inner);
    return out;
  };
  const int64_t cut = 6;
  ops::SsdScanArgs first = full, second = full;
  for (auto [dst, lo, hi] : {std::tuple{&first, int64_t{0}, cut}, std::tuple{&second, cut, s.T}}) {
    dst->x = part(full.x, lo, hi);
    dst->dt = part(full.dt, lo, hi);
    dst->Bm = part(full.Bm, lo, hi);
    dst->Cm = part(full.Cm, lo, hi);
  }
  Tensor y1 = Tensor::empty(first.x.shape(), DType::f64), y2 = Tensor::empty(second.x.shape(), DType::f64);
  Tensor mid = Tensor::empty(fs.shape(), DType::f64), fs2 = Tensor::empty(fs.shape(), DType::f64);
  ops::ssd_scan_forward(ctx, first, y1, &mid);
  second.initial_state = mid;
  ops::ssd_scan_forward(ctx, second, y2, &fs2);
  EXPECT_LT(relative_error(y1, part(y, 0, cut)), 1e-12);
  EXPECT_LT(relative_error(y2, part(y, cut, s.T)), 1e-12);
  EXPECT_LT(relative_error(fs2, fs), 1e-12);
}

TEST(SsdScan, backward_does_not_depend_on_chunk_size_f64) {
  Context ctx = cpu_context(DType::f64);
  ScanShape s{2, 23, 4, 3, 2, 5};
  ops::SsdScanArgs a = random_args(s, true);
  Tensor dy = uniform(a.x.shape(), 8, -1, 1), dfs = uniform({s.B, s.nH, s.P, s.N}, 9, -1, 1);
  auto grads = [&](int64_t chunk) {
    a.chunk_size = chunk;
    ops::SsdScanGrads g{Tensor::empty(a.x.shape(), DType::f64),  Tensor::empty(a.dt.shape(), DType::f64),
                        Tensor::empty(a.Bm.shape(), DType::f64), Tensor::empty(a.Cm.shape(), DType::f64),
                        Tensor::zeros({s.nH}, DType::f64),       Tensor::zeros({s.nH}, DType::f64),
                        Tensor::empty(a.initial_state.shape(), DType::f64)};
    ops::ssd_scan_backward(ctx, a, dy, &dfs, g);
    return std::vector<Tensor>{g.dx, g.ddt, g.dBm, g.dCm, g.dA, g.dD, g.d_initial_state};
  };
  std::vector<Tensor> ref = grads(1);
  const char* names[] = {"dx", "ddt", "dBm", "dCm", "dA", "dD", "d_initial_state"};
  for (int64_t chunk : {int64_t{4}, int64_t{16}, int64_t{64}}) {
    std::vector<Tensor> got = grads(chunk);
    for (size_t k = 0; k < ref.size(); ++k)
      EXPECT_LT(relative_error(got[k], ref[k]), 1e-10) << names[k] << ", chunk " << chunk;
  }
}

}  // namespace
}  // namespace nemotron::testing
