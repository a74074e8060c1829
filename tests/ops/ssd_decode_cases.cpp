// ssd_decode: the harness (CPU float32 against float64) on random states and ragged batches, and
// THE proof: feeding sequences in pieces through the slot states gives ssd_scan's output and final
// state (the sequential and the chunked form) from the same initial state.
#include <gtest/gtest.h>

#include "decode_test_util.h"
#include "harness.h"
#include "ops/ssd_decode.h"
#include "ops/ssd_scan.h"

namespace nemotron::testing {
namespace {

class SsdDecodeCase : public OpCase {
 public:
  SsdDecodeCase(std::vector<int32_t> counts, std::vector<int32_t> slots, int64_t num_slots, int64_t nH, int64_t P,
                int64_t G, int64_t N)
      : counts_(std::move(counts)), slots_(std::move(slots)), num_slots_(num_slots), nH_(nH), P_(P), G_(G), N_(N) {
    for (int32_t n : counts_) Ntot_ += n;
  }
  std::string op() const override { return "ssd_decode"; }
  std::string params() const override {
    return fmt::format("n={},slots={},nH={},P={},G={},N={}", counts_str(counts_), num_slots_, nH_, P_, G_, N_);
  }
  bool has_backward() const override { return false; }
  std::vector<InputSpec> inputs() const override {
    return {{"x", {Ntot_, nH_, P_}, DType::f64, false},
            {"dt", {Ntot_, nH_}, DType::f64, false, 0.05, 0.5, true},
            {"A", {nH_}, DType::f64, false, -1.5, -0.2, true},
            {"Bm", {Ntot_, G_, N_}, DType::f64, false},
            {"Cm", {Ntot_, G_, N_}, DType::f64, false},
            {"D", {nH_}, DType::f64, false, 0.5, 1.5},
            {"state", {num_slots_, nH_, P_, N_}, DType::f64, false, -1, 1, true}};
  }
  std::vector<Tensor> forward(Context& ctx, const std::vector<Tensor>& in) const override {
    ops::SsdDecodeArgs a{in[0], in[1], in[2], in[3], in[4], in[5], i32_on(ctx, slots_), i32_on(ctx, offsets_of(counts_))};
    Tensor state = in[6].clone(), y = ctx.empty(in[0].shape(), in[0].dtype());
    ops::ssd_decode(ctx, a, state, y);
    return {y, state};
  }

 private:
  std::vector<int32_t> counts_, slots_;
  int64_t num_slots_, nH_, P_, G_, N_, Ntot_ = 0;
};

NM_OP_CASES(ssd_decode_cases) {
  CaseList c;
  c.push_back(std::make_unique<SsdDecodeCase>(std::vector<int32_t>{1}, std::vector<int32_t>{0}, 1, 2, 3, 1, 4));
  c.push_back(std::make_unique<SsdDecodeCase>(std::vector<int32_t>{1, 1, 1}, std::vector<int32_t>{3, 0, 2}, 4, 4, 4, 2, 8));
  c.push_back(std::make_unique<SsdDecodeCase>(std::vector<int32_t>{7, 1, 0, 13}, std::vector<int32_t>{1, 4, 0, 2}, 5, 8, 16, 2, 16));
  // Nemotron-H's state size (N = 128) and a partial lane group (N = 40), decode beside a chunk.
  c.push_back(
      std::make_unique<SsdDecodeCase>(std::vector<int32_t>{1, 16, 1}, std::vector<int32_t>{2, 0, 3}, 4, 4, 32, 2, 128));
  c.push_back(std::make_unique<SsdDecodeCase>(std::vector<int32_t>{5, 1}, std::vector<int32_t>{1, 0}, 2, 2, 8, 1, 40));
  return c;
}

// Sequences of 11 and 6 tokens in slots 2 and 0, fed as pieces (3+1+7 and 6+0+0 tokens), equal
// one scan per sequence from the same initial state.
TEST(SsdDecode, pieces_through_the_state_equal_the_scan) {
  const int64_t nH = 4, P = 3, G = 2, N = 5, slots = 3;
  const std::vector<int64_t> len{11, 6}, slot{2, 0};
  const std::vector<std::vector<int32_t>> pieces{{3, 6}, {1, 0}, {7, 0}};
  Context ctx = cpu_context(DType::f64);
  Tensor A = random_tensor({nH}, DType::f64, 1, -1.5, -0.2), D = random_tensor({nH}, DType::f64, 2, 0.5, 1.5);
  Tensor init = random_tensor({slots, nH, P, N}, DType::f64, 3);
  Tensor state = init.clone();
  std::vector<Tensor> x, dt, Bm, Cm;
  for (size_t s = 0; s < len.size(); ++s) {
    x.push_back(random_tensor({1, len[s], nH, P}, DType::f64, 10 + s));
    dt.push_back(random_tensor({1, len[s], nH}, DType::f64, 20 + s, 0.05, 0.5));
    Bm.push_back(random_tensor({1, len[s], G, N}, DType::f64, 30 + s));
    Cm.push_back(random_tensor({1, len[s], G, N}, DType::f64, 40 + s));
  }
  std::vector<Tensor> y_dec;
  for (size_t s = 0; s < len.size(); ++s) y_dec.push_back(Tensor::zeros({len[s], nH, P}, DType::f64));
  std::vector<int64_t> done(len.size(), 0);
  for (const auto& piece : pieces) {
    // Pack this round's tokens of every sequence.
    int64_t tot = piece[0] + piece[1];
    Tensor px = Tensor::empty({tot, nH, P}, DType::f64), pdt = Tensor::empty({tot, nH}, DType::f64);
    Tensor pB = Tensor::empty({tot, G, N}, DType::f64), pC = Tensor::empty({tot, G, N}, DType::f64);
    int64_t r = 0;
    for (size_t s = 0; s < len.size(); ++s) {
      int64_t a = done[s], b = done[s] + piece[s];
      px.slice(r, r + piece[s]).copy_from(x[s].view({len[s], nH, P}).slice(a, b));
      pdt.slice(r, r + piece[s]).copy_from(dt[s].view({len[s], nH}).slice(a, b));
      pB.slice(r, r + piece[s]).copy_from(Bm[s].view({len[s], G, N}).slice(a, b));
      pC.slice(r, r + piece[s]).copy_from(Cm[s].view({len[s], G, N}).slice(a, b));
      r = b - a + r;
    }
    Tensor y = Tensor::empty({tot, nH, P}, DType::f64);
    std::vector<int32_t> slot32(slot.begin(), slot.end());
    ops::ssd_decode(ctx, {px, pdt, A, pB, pC, D, i32_tensor(slot32), i32_tensor(offsets_of(piece))}, state, y);
    r = 0;
    for (size_t s = 0; s < len.size(); ++s) {
      y_dec[s].slice(done[s], done[s] + piece[s]).copy_from(y.slice(r, r + piece[s]));
      r += piece[s], done[s] += piece[s];
    }
  }
  for (size_t s = 0; s < len.size(); ++s) {
    ASSERT_EQ(done[s], len[s]);
    for (bool chunked : {false, true}) {
      ops::SsdScanArgs args{x[s], dt[s], A, Bm[s], Cm[s], D, init.slice(slot[s], slot[s] + 1).clone(), 4};
      Tensor y = Tensor::empty({1, len[s], nH, P}, DType::f64), fin = Tensor::empty({1, nH, P, N}, DType::f64);
      if (chunked) ops::ssd_scan_forward(ctx, args, y, &fin);
      else ops::ssd_scan_naive_forward(ctx, args, y, &fin);
      EXPECT_LT(relative_error(y_dec[s].view(y.shape()), y), 1e-13) << "sequence " << s << " chunked " << chunked;
      EXPECT_LT(relative_error(state.slice(slot[s], slot[s] + 1), fin), 1e-13) << "sequence " << s;
    }
  }
  // The slot no sequence used keeps its state.
  EXPECT_EQ(relative_error(state.slice(1, 2), init.slice(1, 2)), 0.0);
}

TEST(SsdDecode, refuses_a_slot_twice_in_one_call) {
  Context ctx = cpu_context(DType::f64);
  Tensor x = random_tensor({2, 2, 2}, DType::f64, 1), dt = random_tensor({2, 2}, DType::f64, 2, 0.1, 0.2);
  Tensor B = random_tensor({2, 1, 2}, DType::f64, 3), A = random_tensor({2}, DType::f64, 4, -1, -0.5);
  Tensor state = Tensor::zeros({2, 2, 2, 2}, DType::f64), y = Tensor::empty({2, 2, 2}, DType::f64);
  EXPECT_THROW(ops::ssd_decode(ctx, {x, dt, A, B, B, A, i32_tensor({1, 1}), i32_tensor({0, 1, 2})}, state, y), Error);
}

}  // namespace
}  // namespace nemotron::testing
