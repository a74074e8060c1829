// The chunked SSD scan (A.3.3) computes the same function as the sequential recurrence (A.3.2
// step 5): outputs and final states agree in float64 for every chunk size, ragged last chunks,
// several groups, with and without an initial state. The chunked backward does not depend on the
// chunk size either. On packed rows (seq_idx) the chunked scan equals the sequential one, and a
// packed row equals every sequence run alone (THE proof for the SSD scan on packed rows).
#include <gtest/gtest.h>

#include "core/rng.h"
#include "harness.h"
#include "ops/ssd_scan.h"
#include "packed_rows.h"

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

namespace nemotron::testing {
namespace {

// Packed rows: chunk edges at 3 and 4 multiples, boundaries on them and between, length-1
// sequences, T = 29 not a multiple of any chunk tried but 1 and 29 + 5.
const PackedLayout kLayout{{1, 3, 4, 1, 8, 12}, {29}, {5, 1, 1, 9, 13}};
const ScanShape kPackedShape{3, 29, 4, 3, 2, 5};

TEST(SsdScan, packed_chunked_equals_packed_naive_recurrence_f64) {
  Context ctx = cpu_context(DType::f64);
  for (bool with_state : {false, true}) {
    ops::SsdScanArgs a = random_args(kPackedShape, with_state);
    a.seq_idx = seq_idx_tensor(ctx, kLayout, kPackedShape.T);
    const ScanShape& s = kPackedShape;
    Tensor y_ref = Tensor::empty(a.x.shape(), DType::f64), fs_ref = Tensor::empty({s.B, s.nH, s.P, s.N}, DType::f64);
    ops::ssd_scan_naive_forward(ctx, a, y_ref, &fs_ref);
    for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{16}, s.T + 5}) {
      a.chunk_size = chunk;
      Tensor y = Tensor::empty(a.x.shape(), DType::f64), fs = Tensor::empty(fs_ref.shape(), DType::f64);
      ops::ssd_scan_forward(ctx, a, y, &fs);
      EXPECT_LT(relative_error(y, y_ref), 1e-10) << "y, chunk " << chunk << ", state " << with_state;
      EXPECT_LT(relative_error(fs, fs_ref), 1e-10) << "final state, chunk " << chunk << ", state " << with_state;
    }
  }
}

// Every sequence of a packed row gets the y and the gradients it gets alone; the initial state
// belongs to the row's first sequence, the final state is the last sequence's; dA and dD sum over
// the sequences. Checked for several chunk sizes so boundaries fall on and between chunk edges.
TEST(SsdScan, packed_row_equals_each_sequence_alone_f64) {
  Context ctx = cpu_context(DType::f64);
  const ScanShape& s = kPackedShape;
  ops::SsdScanArgs a = random_args(s, true);
  a.seq_idx = seq_idx_tensor(ctx, kLayout, s.T);
  Tensor dy = uniform(a.x.shape(), 11, -1, 1), dfs = uniform({s.B, s.nH, s.P, s.N}, 12, -1, 1);
  struct Out {
    Tensor y, fs;
    ops::SsdScanGrads g;
  };
  auto run = [&](const ops::SsdScanArgs& args, const Tensor& dy_, const Tensor& dfs_) {
    const int64_t B = args.x.dim(0);
    Out o;
    o.y = Tensor::empty(args.x.shape(), DType::f64);
    o.fs = Tensor::empty({B, s.nH, s.P, s.N}, DType::f64);
    ops::ssd_scan_forward(ctx, args, o.y, &o.fs);
    o.g = {Tensor::empty(args.x.shape(), DType::f64),  Tensor::empty(args.dt.shape(), DType::f64),
           Tensor::empty(args.Bm.shape(), DType::f64), Tensor::empty(args.Cm.shape(), DType::f64),
           Tensor::zeros({s.nH}, DType::f64),          Tensor::zeros({s.nH}, DType::f64),
           args.initial_state.defined() ? Tensor::empty(args.initial_state.shape(), DType::f64) : Tensor()};
    ops::ssd_scan_backward(ctx, args, dy_, &dfs_, o.g);
    return o;
  };
  for (int64_t chunk : {int64_t{1}, int64_t{4}, int64_t{5}, int64_t{64}}) {
    a.chunk_size = chunk;
    Out packed = run(a, dy, dfs);
    Tensor dA = Tensor::zeros({s.nH}, DType::f64), dD = Tensor::zeros({s.nH}, DType::f64);
    for (size_t b = 0; b < kLayout.size(); ++b) {
      auto seqs = spans(kLayout, b);
      for (size_t k = 0; k < seqs.size(); ++k) {
        auto [t0, t1] = seqs[k];
        const bool first = k == 0, last = k + 1 == seqs.size();
        ops::SsdScanArgs one = a;
        one.seq_idx = Tensor();
        one.x = tokens(a.x, b, t0, t1).clone(), one.dt = tokens(a.dt, b, t0, t1).clone();
        one.Bm = tokens(a.Bm, b, t0, t1).clone(), one.Cm = tokens(a.Cm, b, t0, t1).clone();
        one.initial_state = first ? a.initial_state.slice(b, b + 1).clone() : Tensor();
        // The final state's gradient reaches only the last sequence.
        Tensor dfs_one = last ? dfs.slice(b, b + 1).clone() : Tensor::zeros({1, s.nH, s.P, s.N}, DType::f64);
        Out alone = run(one, tokens(dy, b, t0, t1).clone(), dfs_one);
        const std::string where = fmt::format("chunk {}, row {}, tokens [{}, {})", chunk, b, t0, t1);
        EXPECT_LT(relative_error(tokens(packed.y, b, t0, t1), alone.y), 1e-10) << "y, " << where;
        EXPECT_LT(relative_error(tokens(packed.g.dx, b, t0, t1), alone.g.dx), 1e-10) << "dx, " << where;
        EXPECT_LT(relative_error(tokens(packed.g.ddt, b, t0, t1), alone.g.ddt), 1e-10) << "ddt, " << where;
        EXPECT_LT(relative_error(tokens(packed.g.dBm, b, t0, t1), alone.g.dBm), 1e-10) << "dBm, " << where;
        EXPECT_LT(relative_error(tokens(packed.g.dCm, b, t0, t1), alone.g.dCm), 1e-10) << "dCm, " << where;
        if (last) {
          EXPECT_LT(relative_error(packed.fs.slice(b, b + 1), alone.fs), 1e-10) << "final state, " << where;
        }
        if (first) {
          EXPECT_LT(relative_error(packed.g.d_initial_state.slice(b, b + 1), alone.g.d_initial_state), 1e-10)
              << "d_initial_state, " << where;
        }
        double* pA = dA.data<double>();
        double* pD = dD.data<double>();
        for (int64_t h = 0; h < s.nH; ++h) {
          pA[h] += alone.g.dA.data<double>()[h];
          pD[h] += alone.g.dD.data<double>()[h];
        }
      }
    }
    EXPECT_LT(relative_error(packed.g.dA, dA), 1e-10) << "dA, chunk " << chunk;
    EXPECT_LT(relative_error(packed.g.dD, dD), 1e-10) << "dD, chunk " << chunk;
  }
}

// Chunk-end states (SsdChunkStates): the chunked forward writes what the sequential recurrence
// holds after each chunk's last token; on a row whose sequences end on chunk ends (dt = 0 padding,
// as the engine's prefill lays prompts out) that is each sequence's own final state run alone.
TEST(SsdScan, chunk_end_states_are_each_sequence_final_state_f64) {
  Context ctx = cpu_context(DType::f64);
  const int64_t Q = 4;
  // Sequences of 3 (+1 pad), 8, 2 (+2 pad) and 5 tokens (the last needs no padding).
  const std::vector<int64_t> real{3, 8, 2, 5}, padded{4, 8, 4, 5};
  const ScanShape s{1, 21, 4, 3, 2, 5};
  ops::SsdScanArgs a = random_args(s, false);
  a.chunk_size = Q;
  a.seq_idx = seq_idx_tensor(ctx, PackedLayout{padded}, s.T);
  double* dt = a.dt.data<double>();
  std::vector<std::pair<int64_t, int64_t>> seqs;  // [start, real end) in the padded row
  for (int64_t k = 0, t0 = 0; k < 4; t0 += padded[k], ++k) {
    seqs.emplace_back(t0, t0 + real[k]);
    for (int64_t t = t0 + real[k]; t < t0 + padded[k]; ++t)
      for (int64_t h = 0; h < s.nH; ++h) dt[t * s.nH + h] = 0.0;
  }
  // Chunks 0..5 end at tokens 3, 7, 11, 15, 19, 20: the ends of sequences 0, (1's middle), 1, 2, -, 3.
  const std::vector<int32_t> slots{4, 2, 0, 5, -1, 1};
  const Tensor init = uniform({6, s.nH, s.P, s.N}, 8, -1, 1);
  Tensor states[2];
  for (bool naive : {true, false}) {
    ops::SsdChunkStates cs{init.clone(), Tensor::from_vector<int32_t>({1, 6}, slots)};
    Tensor y = Tensor::empty(a.x.shape(), DType::f64);
    if (naive) ops::ssd_scan_naive_forward(ctx, a, y, nullptr, &cs);
    else ops::ssd_scan_forward(ctx, a, y, nullptr, &cs);
    states[naive ? 0 : 1] = cs.states;
  }
  EXPECT_LT(relative_error(states[1], states[0]), 1e-12) << "chunked vs sequential";
  EXPECT_EQ(relative_error(states[1].slice(3, 4), init.slice(3, 4)), 0.0) << "a row no chunk names";
  const int32_t slot_of[4] = {4, 0, 5, 1};
  for (size_t k = 0; k < seqs.size(); ++k) {
    auto [t0, t1] = seqs[k];
    ops::SsdScanArgs one = a;
    one.seq_idx = Tensor();
    one.x = tokens(a.x, 0, t0, t1).clone(), one.dt = tokens(a.dt, 0, t0, t1).clone();
    one.Bm = tokens(a.Bm, 0, t0, t1).clone(), one.Cm = tokens(a.Cm, 0, t0, t1).clone();
    Tensor y = Tensor::empty(one.x.shape(), DType::f64), fs = Tensor::empty({1, s.nH, s.P, s.N}, DType::f64);
    ops::ssd_scan_naive_forward(ctx, one, y, &fs);
    EXPECT_LT(relative_error(states[1].slice(slot_of[k], slot_of[k] + 1), fs), 1e-12) << "sequence " << k;
  }
}

}  // namespace
}  // namespace nemotron::testing
