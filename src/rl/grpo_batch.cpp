#include "rl/grpo_batch.h"

#include <algorithm>

#include "core/error.h"
#include "model/context_split.h"
#include "parallel/process_groups.h"
#include "train/compute_device.h"
#include "train/context_batch.h"

namespace nemotron::rl {

std::vector<GrpoMicroBatch> build_grpo_micro_batches(const std::vector<Rollout>& rows,
                                                     const std::vector<double>& advantages,
                                                     const GrpoBatchOptions& opt, GrpoBatchCounts* counts,
                                                     const std::vector<double>& rewards) {
  NM_CHECK(advantages.size() == rows.size(), "{} advantages for {} rollouts", advantages.size(), rows.size());
  NM_CHECK(rewards.empty() || rewards.size() == rows.size(), "{} rewards for {} rollouts", rewards.size(), rows.size());
  NM_CHECK(opt.micro_batch_size > 0 && opt.max_total_sequence_length >= 2, "bad GRPO batch options");
  GrpoBatchCounts c;
  c.rows = static_cast<int64_t>(rows.size());
  const int64_t Bm = opt.micro_batch_size, L = opt.max_total_sequence_length;
  std::vector<GrpoMicroBatch> out;
  for (size_t first = 0; first < rows.size(); first += static_cast<size_t>(Bm)) {
    const size_t last = std::min(rows.size(), first + static_cast<size_t>(Bm));
    int64_t T = 1;
    for (size_t r = first; r < last; ++r) {
      const Rollout& ro = rows[r];
      NM_CHECK(ro.generation_logprobs.size() == ro.response.size(), "rollout {}: {} generation log-probs for {} response tokens",
               r, ro.generation_logprobs.size(), ro.response.size());
      NM_CHECK(!ro.prompt.empty(), "rollout {}: empty prompt (the first response token needs a context)", r);
      T = std::max(T, std::min(L, static_cast<int64_t>(ro.prompt.size() + ro.response.size())));
    }
    // Padding after a row changes none of its tokens' log-probs (causal), only the chunks' cut.
    const int64_t m = std::max<int64_t>(opt.length_multiple, 1);
    T = (std::max(T, opt.min_length) + m - 1) / m * m;
    const size_t N = static_cast<size_t>(Bm * T);
    std::vector<int32_t> ids(N, opt.pad_id), labels(N, -100);
    std::vector<double> mask(N, 0.0);
    GrpoTokenData d;
    d.advantages.assign(N, 0.0);
    d.generation_logprobs.assign(N, 0.0);
    d.sample_mask.assign(static_cast<size_t>(Bm), 0.0);
    d.rewards.assign(static_cast<size_t>(Bm), 0.0);
    for (size_t r = first; r < last; ++r) {
      const Rollout& ro = rows[r];
      const size_t b = r - first, P = ro.prompt.size();
      std::vector<int32_t> seq(ro.prompt);
      seq.insert(seq.end(), ro.response.begin(), ro.response.end());
      double sample = 1.0;
      const bool over = static_cast<int64_t>(seq.size()) > L;
      if (over) seq.resize(static_cast<size_t>(L));
      if (ro.unscored) sample = 0.0, ++c.unscored;
      else if (over) sample = 0.0, ++c.overlong;
      else if (ro.mask_sample || (opt.overlong_filtering && ro.truncated)) sample = 0.0, ++c.filtered;
      d.sample_mask[b] = sample;
      d.rewards[b] = rewards.empty() ? ro.reward : rewards[r];
      for (size_t t = 0; t < seq.size(); ++t) {
        const size_t n = b * static_cast<size_t>(T) + t;
        ids[n] = seq[t];
        if (t + 1 >= seq.size()) continue;
        labels[n] = seq[t + 1];
        if (t + 1 < P) continue;  // the label is a prompt token
        mask[n] = 1.0;
        d.advantages[n] = advantages[r];
        d.generation_logprobs[n] = ro.generation_logprobs[t + 1 - P];
        if (sample > 0) ++c.loss_tokens;
      }
    }
    c.padding_rows += Bm - static_cast<int64_t>(last - first);
    Tensor mask_t = Tensor::from_vector<double>({Bm, T}, mask).to_host(opt.mask_dtype);
    GrpoMicroBatch mb{{Tensor::from_vector<int32_t>({Bm, T}, ids), Tensor::from_vector<int32_t>({Bm, T}, labels), mask_t},
                      std::move(d)};
    out.push_back(std::move(mb));
  }
  if (counts) *counts = c;
  return out;
}

int64_t fill_policy_logprobs(Context& ctx, model::HybridModel& net, std::vector<GrpoMicroBatch>& micro, bool reference) {
  const parallel::Communicator& cp = *parallel::groups_of(ctx).context;
  int64_t tokens = 0;
  for (GrpoMicroBatch& mb : micro) {
    // Context parallelism: this rank's two chunks of every row (the training step's cut, so the
    // same padding and the same exchanges), then the chunks of every rank gathered back into whole
    // rows: the per-token data beside them (advantages, generation log-probs) is whole on every
    // rank, and the gather moves one value per token, nothing beside the forward's activations.
    const model::Batch mine = train::context_shard(mb.batch, cp.rank(), cp.size());
    // The token ids go to the model's device ([B, T] int32: small); the log-probs come back.
    const model::Batch b = train::batch_on(mine, net.params().backend());
    const int64_t B = b.input_ids.dim(0), T = b.input_ids.dim(1);
    tokens += B * T;
    Tensor lp = net.token_logprobs(ctx, b.input_ids, b.labels, nullptr, b.layout());
    if (cp.size() > 1) lp = model::gather_context(ctx, lp.view({B, T}));
    (reference ? mb.data.reference_logprobs : mb.data.prev_logprobs) = lp.to_f64_vector();
    // The forward's activations are done with (the log-probs are on the host): an arena (the CPU
    // training step's) holds one micro-batch's at a time, as the training step's does.
    if (ctx.workspace) ctx.workspace->reset();
  }
  return tokens;
}

std::vector<model::Batch> batches_of(const std::vector<GrpoMicroBatch>& micro) {
  std::vector<model::Batch> b;
  for (const GrpoMicroBatch& m : micro) b.push_back(m.batch);
  return b;
}

std::vector<GrpoTokenData> loss_data_of(const std::vector<GrpoMicroBatch>& micro) {
  std::vector<GrpoTokenData> d;
  for (const GrpoMicroBatch& m : micro) d.push_back(m.data);
  return d;
}

}  // namespace nemotron::rl
