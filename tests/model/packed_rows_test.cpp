// Packed rows through the whole hybrid model (Mamba-2, attention with RoPE, dense MLP, MoE):
// a row holding two sequences and padding, with their seq_idx and position_ids, gives each
// sequence the per-token losses it has alone, and parameter gradients equal to the sum of the two
// separate runs (float64 on the CPU). The chunk size (4) puts the second sequence's start
// mid-chunk, so the SSD scan's masked chunk path is exercised, and the conv window (K = 3) spans
// the boundary. Without the layout the same row gives other losses (the test can fail).
#include <gtest/gtest.h>

#include <vector>

#include "block_configs.h"
#include "harness.h"
#include "model/hybrid_model.h"
#include "train/train_step.h"

namespace nemotron::testing {
namespace {

struct Seq {
  std::vector<int32_t> tokens;  // L + 1 tokens: inputs are the first L, labels the last L
};

model::ModelConfig packed_test_config() {
  model::ModelConfig c = hybrid_config("M*M-E");
  c.position_embedding_type = "rope";
  c.rope_theta = 10000.0;
  return c;
}

std::vector<double> grads_of(model::HybridModel& net) {
  std::vector<double> g;
  for (const model::Param* p : net.params().all()) {
    if (!p->requires_grad) continue;
    std::vector<double> v = p->grad.to_f64_vector();
    g.insert(g.end(), v.begin(), v.end());
  }
  return g;
}

class PackedRows : public ::testing::Test {
 protected:
  PackedRows() : net(packed_test_config(), host_backend(), DType::f64), ctx(cpu_context(DType::f64)) {
    net.init(11);
  }
  const std::vector<Seq> seqs = {{{3, 17, 5, 9, 1, 22}}, {{7, 2, 2, 14, 19, 8, 4}}};
  static constexpr int32_t kPad = 0;
  static constexpr int64_t kT = 14;  // 5 + 6 tokens and 3 of padding

  model::Batch single(const Seq& s) const {
    const int64_t L = static_cast<int64_t>(s.tokens.size()) - 1;
    std::vector<int32_t> in(s.tokens.begin(), s.tokens.end() - 1), lab(s.tokens.begin() + 1, s.tokens.end());
    return {Tensor::from_vector<int32_t>({1, L}, in), Tensor::from_vector<int32_t>({1, L}, lab), Tensor()};
  }
  // As data::collate_packed_row lays a row out: segments, then padding as one more segment.
  model::Batch packed(bool with_layout) const {
    std::vector<int32_t> in, lab, seq, pos;
    std::vector<double> mask;
    for (size_t k = 0; k < seqs.size(); ++k)
      for (size_t j = 0; j + 1 < seqs[k].tokens.size(); ++j) {
        in.push_back(seqs[k].tokens[j]), lab.push_back(seqs[k].tokens[j + 1]);
        seq.push_back(static_cast<int32_t>(k)), pos.push_back(static_cast<int32_t>(j)), mask.push_back(1.0);
      }
    while (static_cast<int64_t>(in.size()) < kT)
      in.push_back(kPad), lab.push_back(kPad), seq.push_back(2), pos.push_back(0), mask.push_back(0.0);
    model::Batch b{Tensor::from_vector<int32_t>({1, kT}, in), Tensor::from_vector<int32_t>({1, kT}, lab),
                   Tensor::from_vector<double>({1, kT}, mask)};
    if (with_layout) b.seq_idx = Tensor::from_vector<int32_t>({1, kT}, seq), b.position_ids = Tensor::from_vector<int32_t>({1, kT}, pos);
    return b;
  }
  std::vector<double> logprobs(const model::Batch& b) {
    return net.token_logprobs(ctx, b.input_ids, b.labels, nullptr, b.layout()).to_f64_vector();
  }

  model::HybridModel net;
  Context ctx;
};

TEST_F(PackedRows, per_token_losses_equal_separate_runs) {
  std::vector<double> want;
  for (const Seq& s : seqs) {
    std::vector<double> lp = logprobs(single(s));
    want.insert(want.end(), lp.begin(), lp.end());
  }
  const std::vector<double> got = logprobs(packed(true));
  ASSERT_EQ(got.size(), static_cast<size_t>(kT));
  for (size_t n = 0; n < want.size(); ++n) EXPECT_NEAR(got[n], want[n], 1e-12) << "token " << n;

  // The same row without its layout: the second sequence sees the first, so its losses differ.
  const std::vector<double> plain = logprobs(packed(false));
  double diff = 0;
  for (size_t n = 5; n < want.size(); ++n) diff = std::max(diff, std::abs(plain[n] - want[n]));
  EXPECT_GT(diff, 1e-6);
}

TEST_F(PackedRows, parameter_gradients_equal_the_sum_of_separate_runs) {
  net.params().zero_grads();
  double want_loss = 0;
  for (const Seq& s : seqs) want_loss += train::cross_entropy_backward(ctx, net, single(s), 1.0).loss_sum;
  const std::vector<double> want = grads_of(net);

  net.params().zero_grads();
  train::LossSum got_loss = train::cross_entropy_backward(ctx, net, packed(true), 1.0);
  const std::vector<double> got = grads_of(net);
  EXPECT_NEAR(got_loss.loss_sum, want_loss, 1e-11);
  EXPECT_EQ(got_loss.token_count, 11);
  ASSERT_EQ(got.size(), want.size());
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::abs(v));
  ASSERT_GT(scale, 0);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-11 * scale) << "gradient element " << i;
}

// Full recomputation replays the mixers' forward in backward: it must replay the layout too.
TEST_F(PackedRows, full_recompute_keeps_the_layout) {
  model::ModelConfig cfg = packed_test_config();
  cfg.recompute_granularity = "full";
  model::HybridModel rnet(cfg, host_backend(), DType::f64);
  rnet.init(11);
  net.params().zero_grads();
  rnet.params().zero_grads();
  train::cross_entropy_backward(ctx, net, packed(true), 1.0);
  train::cross_entropy_backward(ctx, rnet, packed(true), 1.0);
  EXPECT_EQ(grads_of(rnet), grads_of(net));
}

}  // namespace
}  // namespace nemotron::testing
