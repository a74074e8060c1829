#include "train/continuation_scoring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace nemotron::train {

namespace {
// Host logits per head call (float64 once copied): 64 MiB, a few hundred rows of a large vocabulary.
constexpr int64_t kHeadChunkBytes = int64_t{64} << 20;
}  // namespace

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
    const Tensor x = net.forward(ctx, input, nullptr, nullptr, layout);
    // Only the rows that predict a continuation token go through the head, a bounded number at
    // a time: [T, V] logits never exist at once (a 131k vocabulary makes that gigabytes).
    struct Scored {
      size_t request;
      int32_t target;
    };
    std::vector<int64_t> rows;
    std::vector<Scored> scored;
    for (const auto& [r, start] : placed) {
      const ContinuationRequest& req = reqs[r];
      const auto n = static_cast<int64_t>(req.tokens.size()) - 1;
      for (int64_t j = req.prompt_tokens - 1; j < n; ++j) {  // predicts tokens[j + 1], a continuation token
        rows.push_back(start + j);
        scored.push_back({r, req.tokens[static_cast<size_t>(j + 1)]});
      }
    }
    const auto chunk = std::max<int64_t>(1, kHeadChunkBytes / (V * static_cast<int64_t>(sizeof(double))));
    for (size_t c0 = 0; c0 < rows.size(); c0 += static_cast<size_t>(chunk)) {
      const size_t c1 = std::min(rows.size(), c0 + static_cast<size_t>(chunk));
      const std::vector<int64_t> part(rows.begin() + static_cast<std::ptrdiff_t>(c0), rows.begin() + static_cast<std::ptrdiff_t>(c1));
      const std::vector<double> logits = net.head_logits(ctx, x, part, net.params().dtype()).to_f64_vector();
      for (size_t k = c0; k < c1; ++k) {
        const double* z = logits.data() + static_cast<int64_t>(k - c0) * V;
        const double zmax = *std::max_element(z, z + V);
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(z[v] - zmax);
        const int32_t target = scored[k].target;
        ContinuationScore& s = out[scored[k].request];
        s.logprob += z[target] - zmax - std::log(sum);
        s.greedy_tokens += (std::max_element(z, z + V) - z) == target;
        ++s.tokens;
      }
    }
  }
  return out;
}

}  // namespace nemotron::train
