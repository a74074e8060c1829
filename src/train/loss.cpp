#include "train/loss.h"

#include <fmt/format.h>

namespace nemotron::train {

double count_loss_tokens(const model::Batch& batch) {
  std::vector<double> labels = batch.labels.to_f64_vector();
  std::vector<double> mask = batch.loss_mask.defined() ? batch.loss_mask.to_f64_vector() : std::vector<double>();
  double n = 0;
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= 0) n += mask.empty() ? 1.0 : mask[i];
  return n;
}

double MaskedCrossEntropy::normaliser(const std::vector<model::Batch>& micro) {
  double tokens = 0;
  for (const model::Batch& mb : micro) tokens += count_loss_tokens(mb);
  return tokens;
}

bool MaskedCrossEntropy::linear_weights(const model::Batch& mb, Tensor* c) const {
  *c = mb.loss_mask;  // undefined: every labelled token weighs 1
  return true;
}

TokenLossGrad MaskedCrossEntropy::per_token(Context& ctx, int64_t micro_index, const model::Batch& mb,
                                            const Tensor& logprobs) {
  (void)ctx, (void)micro_index;
  const std::vector<double> lp = logprobs.to_f64_vector(), labels = mb.labels.to_f64_vector();
  const std::vector<double> mask =
      mb.loss_mask.defined() ? mb.loss_mask.to_f64_vector() : std::vector<double>(labels.size(), 1.0);
  NM_CHECK(lp.size() == labels.size(), "cross-entropy: {} log-probs for {} labels", lp.size(), labels.size());
  TokenLossGrad g;
  std::vector<double> d(lp.size(), 0.0);
  for (size_t n = 0; n < lp.size(); ++n) {
    if (labels[n] < 0) continue;
    g.loss_sum += mask[n] * -lp[n];
    d[n] = -mask[n];
  }
  g.dlogprob = Tensor::from_vector<double>({static_cast<int64_t>(d.size())}, d);
  return g;
}

}  // namespace nemotron::train
