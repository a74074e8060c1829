#include "train/continuation_scoring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace nemotron::train {

std::vector<ContinuationScore> score_continuations(model::HybridModel& net, const std::vector<ContinuationRequest>& reqs,
                                                   int64_t row_tokens, int32_t pad_id) {
  const int64_t T = row_tokens, V = net.config().vocab_size;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto n = static_cast<int64_t>(reqs[i].tokens.size());
    if (reqs[i].prompt_tokens < 1 || reqs[i].prompt_tokens >= n || n - 1 > T)
      throw InputError(fmt::format("request {}: {} tokens with a prompt of {}: needs a prompt of at least one token, a "
                                   "continuation, and at most {} tokens in all",
                                   i, n, reqs[i].prompt_tokens, T + 1));
  }
  std::vector<ContinuationScore> out(reqs.size());
  Backend& backend = net.params().backend();
  Context ctx{&backend, nullptr, net.params().dtype()};
  size_t next = 0;
  while (next < reqs.size()) {
    // One packed row: whole requests while they fit (inputs are all tokens but the last).
    std::vector<int32_t> ids(static_cast<size_t>(T), pad_id), seq(static_cast<size_t>(T), 0), pos(static_cast<size_t>(T), 0);
    std::vector<std::pair<size_t, int64_t>> placed;  // request, start column
    int64_t t = 0, k = 0;
    while (next < reqs.size()) {
      const auto n = static_cast<int64_t>(reqs[next].tokens.size()) - 1;
      if (t + n > T) break;
      for (int64_t j = 0; j < n; ++j) {
        ids[static_cast<size_t>(t + j)] = reqs[next].tokens[static_cast<size_t>(j)];
        seq[static_cast<size_t>(t + j)] = static_cast<int32_t>(k);
        pos[static_cast<size_t>(t + j)] = static_cast<int32_t>(j);
      }
      placed.emplace_back(next++, t);
      t += n, ++k;
    }
    for (int64_t j = t; j < T; ++j) seq[static_cast<size_t>(j)] = static_cast<int32_t>(k);
    model::SequenceLayout layout{Tensor::from_vector<int32_t>({1, T}, seq).to(backend),
                                 Tensor::from_vector<int32_t>({1, T}, pos).to(backend)};
    const Tensor input = Tensor::from_vector<int32_t>({1, T}, ids).to(backend);
    const std::vector<double> logits = net.logits(ctx, input, layout).to_f64_vector();
    for (const auto& [r, start] : placed) {
      const ContinuationRequest& req = reqs[r];
      const auto n = static_cast<int64_t>(req.tokens.size()) - 1;
      ContinuationScore& s = out[r];
      for (int64_t j = req.prompt_tokens - 1; j < n; ++j) {  // predicts tokens[j + 1], a continuation token
        const double* z = logits.data() + (start + j) * V;
        const double zmax = *std::max_element(z, z + V);
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(z[v] - zmax);
        const int32_t target = req.tokens[static_cast<size_t>(j + 1)];
        s.logprob += z[target] - zmax - std::log(sum);
        s.greedy_tokens += (std::max_element(z, z + V) - z) == target;
        ++s.tokens;
      }
    }
  }
  return out;
}

}  // namespace nemotron::train
