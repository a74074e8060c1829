#include "serve/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace nemotron::serve {

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int64_t k) {
  const auto V = static_cast<int64_t>(logits.size());
  NM_CHECK(token >= 0 && token < V, "token {} outside the logits row of {}", token, V);
  double zmax = -std::numeric_limits<double>::infinity();
  for (float z : logits) zmax = std::max(zmax, static_cast<double>(z));
  double sum = 0;
  for (float z : logits) sum += std::exp(static_cast<double>(z) - zmax);
  const double log_norm = zmax + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.logprob = logits[static_cast<size_t>(token)] - log_norm;
  k = std::min(k, V);
  if (k > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(V));
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
             (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
    });
    for (int64_t i = 0; i < k; ++i) out.top.emplace_back(ids[static_cast<size_t>(i)], logits[static_cast<size_t>(ids[static_cast<size_t>(i)])] - log_norm);
  }
  return out;
}

std::vector<TokenLogprob> prompt_logprobs(model::HybridModel& net, const std::vector<int32_t>& prompt, int64_t k,
                                          const parallel::ProcessGroups* groups) {
  std::vector<TokenLogprob> out;
  if (prompt.empty()) return out;
  TokenLogprob first;
  first.token = prompt[0];
  first.logprob = std::numeric_limits<double>::quiet_NaN();
  out.push_back(first);
  if (prompt.size() == 1) return out;
  const auto T = static_cast<int64_t>(prompt.size());
  const int64_t V = net.config().vocab_size;
  Backend& backend = net.params().backend();
  Context ctx{&backend, nullptr, net.params().dtype()};
  ctx.groups = groups;
  const Tensor input = Tensor::from_vector<int64_t>({1, T}, std::vector<int64_t>(prompt.begin(), prompt.end())).to(backend);
  const Tensor logits = net.logits(ctx, input).to_host(DType::f32);
  const float* z = logits.data<float>();
  for (int64_t t = 1; t < T; ++t)
    out.push_back(token_logprob({z + (t - 1) * V, static_cast<size_t>(V)}, prompt[static_cast<size_t>(t)], k));
  return out;
}

}  // namespace nemotron::serve
