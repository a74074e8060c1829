#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/rng.h"

namespace nemotron::engine {

void validate(const SamplingParams& p, const std::string& where, int64_t V) {
  if (!(std::isfinite(p.temperature) && p.temperature >= 0))
    throw InputError(fmt::format("{}: temperature: expected a number >= 0 (0 = greedy), got {}", where, p.temperature));
  if (!(p.top_p > 0 && p.top_p <= 1))
    throw InputError(fmt::format("{}: top_p: expected a number in (0, 1], got {}", where, p.top_p));
  if (p.top_k < -1) throw InputError(fmt::format("{}: top_k: expected >= 0 (0 or -1 = off), got {}", where, p.top_k));
  if (p.max_new_tokens <= 0)
    throw InputError(fmt::format("{}: max_new_tokens: expected a positive integer, got {}", where, p.max_new_tokens));
  for (const std::string& s : p.stop)
    if (s.empty()) throw InputError(fmt::format("{}: stop: an empty stop string", where));
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    const double x = name[0] == 'p' ? p.presence_penalty : p.frequency_penalty;
    if (!(x >= -2 && x <= 2))
      throw InputError(fmt::format("{}: {}: expected a number in [-2, 2], got {}", where, name, x));
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || (V > 0 && id >= V))
      throw InputError(fmt::format("{}: logit_bias: token id {} outside the vocabulary [0, {})", where, id, V));
    if (!(bias >= -100 && bias <= 100))
      throw InputError(
          fmt::format("{}: logit_bias: bias {} for token {}: expected a number in [-100, 100]", where, bias, id));
  }
}

std::vector<float> adjusted_logits(const float* z, int64_t V, const SamplingParams& p,
                                   std::span<const int32_t> generated) {
  std::vector<float> out(z, z + V);
  for (const auto& [id, bias] : p.logit_bias)
    if (id >= 0 && id < V) out[static_cast<size_t>(id)] += bias;
  if (p.presence_penalty != 0 || p.frequency_penalty != 0) {
    std::vector<int32_t> ids(generated.begin(), generated.end());
    std::sort(ids.begin(), ids.end());
    for (size_t i = 0; i < ids.size();) {  // one run per distinct token: its count
      size_t j = i;
      while (j < ids.size() && ids[j] == ids[i]) ++j;
      const double penalty = static_cast<double>(j - i) * p.frequency_penalty + p.presence_penalty;
      if (ids[i] >= 0 && ids[i] < V) out[static_cast<size_t>(ids[i])] -= static_cast<float>(penalty);
      i = j;
    }
  }
  return out;
}

namespace {

// log-sum-exp of logits / temperature (temperature 1: of the raw logits), in double.
double log_sum_exp(const float* z, int64_t V, double inv_t) {
  double m = -INFINITY;
  for (int64_t v = 0; v < V; ++v) m = std::max(m, z[v] * inv_t);
  double s = 0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(z[v] * inv_t - m);
  return m + std::log(s);
}

}  // namespace

Candidates sampling_candidates(const float* z, int64_t V, const SamplingParams& p) {
  NM_CHECK(p.temperature > 0, "sampling_candidates needs temperature > 0");
  const double inv_t = 1.0 / p.temperature;
  // Sorting all V ids is only needed for top-p; top-k alone needs the k largest.
  const int64_t k = p.top_k > 0 ? std::min(p.top_k, V) : V;
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  auto before = [z](int32_t a, int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); };
  if (k < V) {
    std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
    order.resize(static_cast<size_t>(k));
  } else if (p.top_p < 1) {
    std::sort(order.begin(), order.end(), before);
  }
  double m = -INFINITY;  // the largest kept logit, for a stable exp
  for (int32_t id : order) m = std::max(m, static_cast<double>(z[id]));
  std::vector<double> w(order.size());
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) total += (w[i] = std::exp((z[order[i]] - m) * inv_t));
  size_t keep = order.size();
  if (p.top_p < 1) {  // order is sorted here: the shortest prefix reaching p
    double cum = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      cum += w[i] / total;
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
    total = std::accumulate(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  Candidates c;
  c.ids.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep));
  c.probs.resize(keep);
  for (size_t i = 0; i < keep; ++i) c.probs[i] = w[i] / total;
  return c;
}

ops::RowSampling row_sampling(const SamplingParams& p, uint64_t request_id, uint64_t index) {
  return {p.temperature, p.temperature == 0 ? 0.0 : Philox(p.seed, request_id).uniform(index)};
}

SampledToken sample_token(const float* raw, int64_t V, const SamplingParams& p, uint64_t request_id, uint64_t index,
                          std::span<const int32_t> generated) {
  NM_CHECK(V > 0, "sample_token: empty vocabulary");
  if (p.adjusts_logits()) {
    const std::vector<float> adjusted = adjusted_logits(raw, V, p, generated);
    SamplingParams plain = p;
    plain.logit_bias.clear();
    plain.presence_penalty = plain.frequency_penalty = 0;
    SampledToken t = sample_token(adjusted.data(), V, plain, request_id, index);
    t.raw_logprob = static_cast<float>(raw[t.token] - log_sum_exp(raw, V, 1.0));
    return t;
  }
  const float* z = raw;
  // Greedy, and temperature alone (every id a candidate, in id order): the op's row reference,
  // which the GPU kernel matches (ops/sample_rows.h).
  if (device_samplable(p)) {
    const ops::RowSampling r = row_sampling(p, request_id, index);
    return ops::sample_row(z, V, r.temperature, r.u);
  }
  const double u = Philox(p.seed, request_id).uniform(index);
  SampledToken out;
  Candidates c = sampling_candidates(z, V, p);
  size_t pick = c.ids.size() - 1;  // rounding can leave the cumulative sum just below u
  double cum = 0;
  for (size_t i = 0; i < c.ids.size(); ++i) {
    cum += c.probs[i];
    if (u < cum) {
      pick = i;
      break;
    }
  }
  out.token = c.ids[pick];
  out.logprob = static_cast<float>(std::log(c.probs[pick]));
  out.raw_logprob = static_cast<float>(z[out.token] - log_sum_exp(z, V, 1.0));
  return out;
}

}  // namespace nemotron::engine
