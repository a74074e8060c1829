// The sampler against distributions worked out by hand: greedy, temperature, top-k, top-p (the
// smallest set reaching p), seeded reproducibility, empirical frequencies, and OpenAI's logit bias
// and presence / frequency penalties.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "engine/sampler.h"

namespace nemotron::engine {
namespace {

// Softmax of logits / t in double.
std::vector<double> softmax(const std::vector<float>& z, double t) {
  double m = -INFINITY, s = 0;
  for (float v : z) m = std::max(m, v / t);
  std::vector<double> p;
  for (float v : z) s += std::exp(v / t - m);
  for (float v : z) p.push_back(std::exp(v / t - m) / s);
  return p;
}

const std::vector<float> kLogits = {1.0f, 3.0f, -1.0f, 2.0f, 0.5f, 3.0f};  // order: 1, 5, 3, 0, 4, 2

TEST(Sampler, GreedyTakesTheArgmaxWithLowestIdOnTiesAndTheRawLogprob) {
  SamplingParams p;
  p.temperature = 0;
  SampledToken t = sample_token(kLogits.data(), 6, p, 0, 0);
  EXPECT_EQ(t.token, 1);
  EXPECT_NEAR(t.logprob, std::log(softmax(kLogits, 1)[1]), 1e-6);
  EXPECT_EQ(t.logprob, t.raw_logprob);
}

TEST(Sampler, TemperatureScalesTheDistribution) {
  SamplingParams p;
  p.temperature = 0.5;
  Candidates c = sampling_candidates(kLogits.data(), 6, p);
  std::vector<double> want = softmax(kLogits, 0.5);
  ASSERT_EQ(c.ids.size(), 6u);
  for (size_t i = 0; i < c.ids.size(); ++i) EXPECT_NEAR(c.probs[i], want[c.ids[i]], 1e-12) << c.ids[i];
}

TEST(Sampler, TopKKeepsTheKLargestRenormalized) {
  SamplingParams p;
  p.top_k = 3;
  Candidates c = sampling_candidates(kLogits.data(), 6, p);
  EXPECT_EQ(c.ids, (std::vector<int32_t>{1, 5, 3}));
  std::vector<double> s = softmax(kLogits, 1);
  const double kept = s[1] + s[5] + s[3];
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(c.probs[i], s[c.ids[i]] / kept, 1e-12);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  std::vector<double> s = softmax(kLogits, 1);  // sorted: 1, 5 (equal), 3, 0, 4, 2
  const double two = s[1] + s[5], three = two + s[3];
  SamplingParams p;
  p.top_p = two - 1e-9;  // reached by two tokens: keep two
  EXPECT_EQ(sampling_candidates(kLogits.data(), 6, p).ids, (std::vector<int32_t>{1, 5}));
  p.top_p = two + 1e-9;  // just above: needs the third
  EXPECT_EQ(sampling_candidates(kLogits.data(), 6, p).ids, (std::vector<int32_t>{1, 5, 3}));
  p.top_p = three - 1e-9;
  Candidates c = sampling_candidates(kLogits.data(), 6, p);
  EXPECT_EQ(c.ids, (std::vector<int32_t>{1, 5, 3}));
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(c.probs[i], s[c.ids[i]] / three, 1e-12);
  p.top_p = 1e-6;  // always at least one token
  EXPECT_EQ(sampling_candidates(kLogits.data(), 6, p).ids, (std::vector<int32_t>{1}));
}

TEST(Sampler, TopPAppliesAfterTemperatureAndTopK) {
  SamplingParams p;
  p.temperature = 2.0;
  p.top_k = 4;
  std::vector<double> s = softmax(kLogits, 2.0);
  const double k4 = s[1] + s[5] + s[3] + s[0];
  p.top_p = (s[1] + s[5] + s[3]) / k4 + 1e-9;  // needs the fourth of the renormalized top-4
  EXPECT_EQ(sampling_candidates(kLogits.data(), 6, p).ids, (std::vector<int32_t>{1, 5, 3, 0}));
  p.top_p = (s[1] + s[5] + s[3]) / k4 - 1e-9;
  EXPECT_EQ(sampling_candidates(kLogits.data(), 6, p).ids, (std::vector<int32_t>{1, 5, 3}));
}

TEST(Sampler, SeededDrawsDependOnlyOnSeedRequestAndIndex) {
  SamplingParams p;
  p.seed = 42;
  std::vector<int32_t> a, b, other_request, other_seed;
  for (uint64_t i = 0; i < 64; ++i) a.push_back(sample_token(kLogits.data(), 6, p, 7, i).token);
  for (uint64_t i = 64; i-- > 0;) b.insert(b.begin(), sample_token(kLogits.data(), 6, p, 7, i).token);
  for (uint64_t i = 0; i < 64; ++i) other_request.push_back(sample_token(kLogits.data(), 6, p, 8, i).token);
  p.seed = 43;
  for (uint64_t i = 0; i < 64; ++i) other_seed.push_back(sample_token(kLogits.data(), 6, p, 7, i).token);
  EXPECT_EQ(a, b);  // drawn in reverse order: the same numbers
  EXPECT_NE(a, other_request);
  EXPECT_NE(a, other_seed);
}

TEST(Sampler, FrequenciesMatchTheProcessedDistributionAndLogprobsAreItsLogs) {
  SamplingParams p;
  p.temperature = 0.8;
  p.top_p = 0.9;
  p.seed = 3;
  Candidates c = sampling_candidates(kLogits.data(), 6, p);
  std::map<int32_t, int> count;
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    SampledToken t = sample_token(kLogits.data(), 6, p, 1, static_cast<uint64_t>(i));
    ++count[t.token];
    size_t at = std::find(c.ids.begin(), c.ids.end(), t.token) - c.ids.begin();
    ASSERT_LT(at, c.ids.size()) << "token " << t.token << " outside the kept set";
    EXPECT_NEAR(t.logprob, std::log(c.probs[at]), 1e-6);
    EXPECT_NEAR(t.raw_logprob, std::log(softmax(kLogits, 1)[t.token]), 1e-6);
  }
  for (size_t i = 0; i < c.ids.size(); ++i) {
    const double f = static_cast<double>(count[c.ids[i]]) / n, q = c.probs[i];
    EXPECT_NEAR(f, q, 4 * std::sqrt(q * (1 - q) / n) + 1e-9) << "token " << c.ids[i];
  }
}

// Without top-k and top-p the sampler takes a one-pass path over the logits; top_k = V takes the
// general one with the same candidates in the same order: both give the same draws to the bit.
TEST(Sampler, TheOnePassPathDrawsExactlyAsTheGeneralOne) {
  std::vector<float> z;
  for (int v = 0; v < 97; ++v) z.push_back(static_cast<float>(std::sin(v * 1.7) * 3.0));
  for (double t : {1.0, 0.7, 1.3}) {
    SamplingParams fast, general;
    fast.temperature = general.temperature = t;
    general.top_k = static_cast<int64_t>(z.size());
    for (uint64_t i = 0; i < 200; ++i) {
      const SampledToken a = sample_token(z.data(), 97, fast, 3, i), b = sample_token(z.data(), 97, general, 3, i);
      ASSERT_EQ(a.token, b.token) << "temperature " << t << " draw " << i;
      ASSERT_EQ(a.logprob, b.logprob) << "temperature " << t << " draw " << i;
      ASSERT_EQ(a.raw_logprob, b.raw_logprob) << "temperature " << t << " draw " << i;
    }
  }
}

TEST(Sampler, BadParametersAreInputErrors) {
  using Edit = void (*)(SamplingParams&);
  const Edit bad[] = {
      [](SamplingParams& p) { p.top_p = 0; },
      [](SamplingParams& p) { p.temperature = -1; },
      [](SamplingParams& p) { p.max_new_tokens = 0; },
      [](SamplingParams& p) { p.stop = {""}; },
      [](SamplingParams& p) { p.presence_penalty = 2.5; },
      [](SamplingParams& p) { p.frequency_penalty = -2.01; },
      [](SamplingParams& p) { p.logit_bias = {{7, 1.0f}}; },  // id 7 of a vocabulary of 7
      [](SamplingParams& p) { p.logit_bias = {{0, 101.0f}}; },
  };
  for (size_t i = 0; i < std::size(bad); ++i) {
    SamplingParams p;
    bad[i](p);
    EXPECT_THROW(validate(p, "x", 7), InputError) << "case " << i;
  }
  SamplingParams edge;
  edge.logit_bias = {{6, -100.0f}};
  edge.presence_penalty = -2;
  edge.frequency_penalty = 2;
  EXPECT_NO_THROW(validate(edge, "x", 7));
  EXPECT_NO_THROW(validate(SamplingParams{}, "x"));
}

TEST(Sampler, LogitBiasAndPenaltiesFollowOpenAisFormula) {
  // logit[j] + bias[j] - c[j] * frequency - (c[j] > 0) * presence, c = counts in `generated`.
  SamplingParams p;
  p.logit_bias = {{2, 4.0f}, {4, -1.5f}};
  p.presence_penalty = 0.25;
  p.frequency_penalty = 0.5;
  const std::vector<int32_t> generated = {1, 5, 1, 2};
  const std::vector<float> got = adjusted_logits(kLogits.data(), 6, p, generated);
  const std::vector<float> want = {1.0f, 3.0f - 1.0f - 0.25f, -1.0f + 4.0f - 0.5f - 0.25f, 2.0f, 0.5f - 1.5f,
                                   3.0f - 0.5f - 0.25f};
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < want.size(); ++j) EXPECT_FLOAT_EQ(got[j], want[j]) << j;
  // Negative penalties reward repetition by the same formula.
  p = {};
  p.frequency_penalty = -1;
  EXPECT_FLOAT_EQ(adjusted_logits(kLogits.data(), 6, p, generated)[1], 3.0f + 2.0f);
}

TEST(Sampler, DrawsFromTheAdjustedDistributionAndReportsTheRawLogprob) {
  SamplingParams greedy;
  greedy.temperature = 0;
  // Tokens 1 and 5 tie at 3.0 (greedy takes 1); having generated 1 once, a presence penalty moves it to 5.
  greedy.presence_penalty = 0.1;
  const std::vector<int32_t> generated = {1};
  SampledToken t = sample_token(kLogits.data(), 6, greedy, 0, 0, generated);
  EXPECT_EQ(t.token, 5);
  EXPECT_NEAR(t.raw_logprob, std::log(softmax(kLogits, 1)[5]), 1e-6);
  // A bias of +100 makes the least likely token certain; -100 removes the likeliest.
  greedy = {};
  greedy.temperature = 0;
  greedy.logit_bias = {{2, 100.0f}};
  EXPECT_EQ(sample_token(kLogits.data(), 6, greedy, 0, 0).token, 2);
  greedy.logit_bias = {{1, -100.0f}, {5, -100.0f}};
  EXPECT_EQ(sample_token(kLogits.data(), 6, greedy, 0, 0).token, 3);
  EXPECT_FALSE(device_samplable(greedy));  // adjusted rows are drawn on the host
  // Sampling: each draw equals the unadjusted sampler's draw on the adjusted logits (same stream),
  // and its log-prob is that distribution's.
  SamplingParams p;
  p.temperature = 0.8;
  p.top_k = 4;
  p.logit_bias = {{0, 2.0f}};
  p.frequency_penalty = 0.7;
  const std::vector<int32_t> seen = {5, 5, 3};
  const std::vector<float> adj = adjusted_logits(kLogits.data(), 6, p, seen);
  SamplingParams plain = p;
  plain.logit_bias.clear();
  plain.frequency_penalty = 0;
  for (uint64_t i = 0; i < 50; ++i) {
    const SampledToken a = sample_token(kLogits.data(), 6, p, 9, i, seen), b = sample_token(adj.data(), 6, plain, 9, i);
    ASSERT_EQ(a.token, b.token) << i;
    ASSERT_EQ(a.logprob, b.logprob) << i;
    ASSERT_NEAR(a.raw_logprob, std::log(softmax(kLogits, 1)[static_cast<size_t>(a.token)]), 1e-6) << i;
  }
}

}  // namespace
}  // namespace nemotron::engine
