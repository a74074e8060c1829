#include "train/continuation_scoring.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/cross_entropy.h"

namespace nemotron::train {

namespace {
// Logits per head call on the host, or copied there when greedy is counted (float64 once copied):
// 64 MiB, a few hundred rows of a large vocabulary.
constexpr int64_t kHeadChunkBytes = int64_t{64} << 20;

// Where the scored rows' log-softmax runs: float64 on the host (the exact reference), the model's
// bf16 or float32 on CUDA (the cross-entropy kernel accumulates in float32).
DType scoring_dtype(const Backend& backend, DType model_dtype) {
  if (backend.device().is_cpu()) return DType::f64;
  return model_dtype == DType::bf16 ? DType::bf16 : DType::f32;
}
}  // namespace

std::vector<ContinuationScore> score_continuations(model::HybridModel& net, const std::vector<ContinuationRequest>& reqs,
                                                   const ContinuationScoring& how, ContinuationStats* stats) {
  const int64_t T = how.row_tokens, V = net.config().vocab_size;
  NM_CHECK(T >= 1 && how.rows_per_forward >= 1, "score_continuations: rows of {} tokens, {} per forward", T,
           how.rows_per_forward);
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
  ctx.groups = how.groups;
  const DType logits_dtype = scoring_dtype(backend, net.params().dtype());
  size_t next = 0;
  while (next < reqs.size()) {
    // Up to rows_per_forward packed rows: whole requests while they fit a row (inputs are all
    // tokens but the last), in order, so a request's row does not depend on rows_per_forward.
    std::vector<int32_t> ids, seq, pos;
    std::vector<std::pair<size_t, int64_t>> placed;  // request, flat start column in [B * T]
    int64_t B = 0;
    for (; B < how.rows_per_forward && next < reqs.size(); ++B) {
      ids.resize(static_cast<size_t>((B + 1) * T), how.pad_id);
      seq.resize(static_cast<size_t>((B + 1) * T), 0);
      pos.resize(static_cast<size_t>((B + 1) * T), 0);
      const int64_t row = B * T;
      int64_t t = 0, k = 0;
      while (next < reqs.size()) {
        const auto n = static_cast<int64_t>(reqs[next].tokens.size()) - 1;
        if (t + n > T) break;
        for (int64_t j = 0; j < n; ++j) {
          ids[static_cast<size_t>(row + t + j)] = reqs[next].tokens[static_cast<size_t>(j)];
          seq[static_cast<size_t>(row + t + j)] = static_cast<int32_t>(k);
          pos[static_cast<size_t>(row + t + j)] = static_cast<int32_t>(j);
        }
        placed.emplace_back(next++, row + t);
        t += n, ++k;
      }
      for (int64_t j = t; j < T; ++j) seq[static_cast<size_t>(row + j)] = static_cast<int32_t>(k);
      if (stats) stats->tokens += t;
    }
    model::SequenceLayout layout{Tensor::from_vector<int32_t>({B, T}, seq).to(backend),
                                 Tensor::from_vector<int32_t>({B, T}, pos).to(backend)};
    const Tensor input = Tensor::from_vector<int32_t>({B, T}, ids).to(backend);
    const Tensor x = net.forward(ctx, input, nullptr, nullptr, layout);
    if (stats) ++stats->forwards, stats->rows += B;
    // Only the rows that predict a continuation token go through the head, a bounded number at
    // a time: [B * T, V] logits never exist at once (a 131k vocabulary makes that gigabytes).
    std::vector<int64_t> rows;
    std::vector<size_t> request_of;
    std::vector<int32_t> targets;
    for (const auto& [r, start] : placed) {
      const ContinuationRequest& req = reqs[r];
      const auto n = static_cast<int64_t>(req.tokens.size()) - 1;
      for (int64_t j = req.prompt_tokens - 1; j < n; ++j) {  // predicts tokens[j + 1], a continuation token
        rows.push_back(start + j);
        request_of.push_back(r);
        targets.push_back(req.tokens[static_cast<size_t>(j + 1)]);
      }
    }
    if (stats) stats->scored_tokens += static_cast<int64_t>(rows.size());
    // Host logits stay small; device ones take the head's usual budget (few, large GEMMs).
    const int64_t chunk = how.count_greedy || backend.device().is_cpu()
                              ? std::max<int64_t>(1, kHeadChunkBytes / (V * static_cast<int64_t>(sizeof(double))))
                              : model::head_rows_per_chunk(V, logits_dtype, static_cast<int64_t>(rows.size()));
    for (size_t c0 = 0; c0 < rows.size(); c0 += static_cast<size_t>(chunk)) {
      const size_t c1 = std::min(rows.size(), c0 + static_cast<size_t>(chunk));
      const auto R = static_cast<int64_t>(c1 - c0);
      const std::vector<int64_t> part(rows.begin() + static_cast<std::ptrdiff_t>(c0), rows.begin() + static_cast<std::ptrdiff_t>(c1));
      const std::vector<int32_t> part_targets(targets.begin() + static_cast<std::ptrdiff_t>(c0),
                                              targets.begin() + static_cast<std::ptrdiff_t>(c1));
      const Tensor logits = net.head_logits(ctx, x, part, logits_dtype);
      // -log p(target) per row where the logits are; one number per row comes back.
      Tensor nll = Tensor::empty({R}, stat_dtype(logits_dtype), backend);
      ops::softmax_cross_entropy(ctx, logits, Tensor::from_vector<int32_t>({R}, part_targets).to(backend), Tensor(), 0.0,
                                 nll, nullptr);
      const std::vector<double> nll_host = nll.to_f64_vector();
      for (int64_t k = 0; k < R; ++k) {
        ContinuationScore& s = out[request_of[c0 + static_cast<size_t>(k)]];
        s.logprob -= nll_host[static_cast<size_t>(k)];
        ++s.tokens;
      }
      if (!how.count_greedy) continue;
      const std::vector<double> z_all = logits.to_f64_vector();
      for (int64_t k = 0; k < R; ++k) {
        const double* z = z_all.data() + k * V;
        out[request_of[c0 + static_cast<size_t>(k)]].greedy_tokens +=
            (std::max_element(z, z + V) - z) == part_targets[static_cast<size_t>(k)];
      }
    }
  }
  return out;
}

}  // namespace nemotron::train
