#include "rl/grpo_loss.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace nemotron::rl {

namespace {

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }  // nan_to_num(0, 0, 0)

// calculate_kl with an importance weight w (NeMo RL's newer loss/utils.py, reference §2.8):
// logr = clamp(ref - lp, +-in), k1 = -logr, k2 = logr^2/2, k3 = exp(logr) - 1 - logr, value
// clamp(w * k, +-out). `dw` is d w / d lp (the weight's own gradient, the score-function term);
// where the input clamp is active the weight is detached (and k is constant), where the output
// clamp is active nothing passes. Returns the value and d value / d lp.
struct Kl {
  double value = 0, dlp = 0;
};
Kl kl_term(const std::string& type, double lp, double ref, std::optional<double> in_clamp,
           std::optional<double> out_clamp, double w = 1.0, double dw = 0.0) {
  double logr = ref - lp, dlogr = -1.0;
  if (in_clamp && (logr > *in_clamp || logr < -*in_clamp)) logr = std::clamp(logr, -*in_clamp, *in_clamp), dlogr = 0, dw = 0;
  double k, dk;
  if (type == "k1") {
    k = -logr, dk = -1.0;
  } else if (type == "k2") {
    k = logr * logr / 2, dk = logr;
  } else {
    k = std::exp(logr) - 1 - logr, dk = std::exp(logr) - 1;
  }
  Kl out{w * k, dw * k + w * dk * dlogr};
  if (out_clamp && (out.value > *out_clamp || out.value < -*out_clamp))
    out.value = std::clamp(out.value, -*out_clamp, *out_clamp), out.dlp = 0;
  return out;
}

}  // namespace

std::vector<double> grpo_token_mask(const model::Batch& mb) {
  std::vector<double> m = mb.labels.to_f64_vector();
  const std::vector<double> lm = mb.loss_mask.defined() ? mb.loss_mask.to_f64_vector() : std::vector<double>();
  for (size_t i = 0; i < m.size(); ++i) m[i] = m[i] >= 0 ? (lm.empty() ? 1.0 : lm[i]) : 0.0;
  return m;
}

ClippedPGLoss::ClippedPGLoss(LossFnSection cfg) : cfg_(std::move(cfg)) {
  NM_CHECK(!cfg_.ratio_clip_c || *cfg_.ratio_clip_c > 1, "ratio_clip_c must exceed 1, got {}", *cfg_.ratio_clip_c);
}

double ClippedPGLoss::normaliser(const std::vector<model::Batch>& micro) {
  NM_CHECK(micro.size() == data_.size(), "GRPO loss: {} micro-batches but data for {} (set_data before the step)",
           micro.size(), data_.size());
  valid_tokens_ = valid_samples_ = 0;
  for (size_t k = 0; k < micro.size(); ++k) {
    const std::vector<double> tm = grpo_token_mask(micro[k]);
    const GrpoTokenData& d = data_[k];
    const int64_t B = micro[k].labels.dim(0), T = micro[k].labels.dim(1);
    NM_CHECK(static_cast<int64_t>(d.sample_mask.size()) == B, "GRPO loss: micro-batch {} has {} rows, {} sample masks",
             k, B, d.sample_mask.size());
    for (int64_t b = 0; b < B; ++b) {
      valid_samples_ += d.sample_mask[b];
      for (int64_t t = 0; t < T; ++t) valid_tokens_ += tm[b * T + t] * d.sample_mask[b];
    }
  }
  return cfg_.token_level_loss ? valid_tokens_ : valid_samples_;
}

void ClippedPGLoss::reduce_counts(parallel::Communicator& data_group) {
  std::vector<double> v{valid_tokens_, valid_samples_};
  data_group.all_reduce_host(v);
  valid_tokens_ = v[0], valid_samples_ = v[1];
}

train::TokenLossGrad ClippedPGLoss::per_token(Context& ctx, int64_t micro_index, const model::Batch& mb,
                                              const Tensor& logprobs) {
  (void)ctx;
  NM_CHECK(micro_index >= 0 && micro_index < static_cast<int64_t>(data_.size()),
           "GRPO loss: micro-batch {} but data for {}", micro_index, data_.size());
  const GrpoTokenData& d = data_[micro_index];
  const std::vector<double> lp = logprobs.to_f64_vector(), tm = grpo_token_mask(mb);
  const int64_t B = mb.labels.dim(0), T = mb.labels.dim(1), N = B * T;
  NM_CHECK(static_cast<int64_t>(lp.size()) == N && static_cast<int64_t>(d.advantages.size()) == N &&
               static_cast<int64_t>(d.prev_logprobs.size()) == N &&
               static_cast<int64_t>(d.generation_logprobs.size()) == N &&
               static_cast<int64_t>(d.sample_mask.size()) == B,
           "GRPO loss: micro-batch {} is [{}, {}] but its data has {} advantages, {} prev / {} generation "
           "log-probs, {} sample masks",
           micro_index, B, T, d.advantages.size(), d.prev_logprobs.size(), d.generation_logprobs.size(),
           d.sample_mask.size());
  const bool kl_on = cfg_.reference_policy_kl_penalty != 0;
  NM_CHECK(!kl_on || static_cast<int64_t>(d.reference_logprobs.size()) == N,
           "GRPO loss: reference_policy_kl_penalty is {} but micro-batch {} has {} reference log-probs for {} tokens",
           cfg_.reference_policy_kl_penalty, micro_index, d.reference_logprobs.size(), N);
  const double lo = 1.0 - cfg_.ratio_clip_min, hi = 1.0 + cfg_.ratio_clip_max, beta = cfg_.reference_policy_kl_penalty;
  const double tok_norm = valid_tokens_ > 0 ? valid_tokens_ : 1.0;  // metrics are token means

  train::TokenLossGrad g;
  std::vector<double> dlp(static_cast<size_t>(N), 0.0);
  double ratio_sum = 0, clamped_sum = 0, below = 0, above = 0, kl_sum = 0, mult_err = 0, gen_kl = 0, pol_kl = 0,
         is_sum = 0, entropy = 0, samples = 0;
  for (int64_t b = 0; b < B; ++b) {
    const double sm = d.sample_mask[b];
    samples += sm;
    double row_tokens = 0;
    for (int64_t t = 0; t < T; ++t) row_tokens += tm[b * T + t];
    // Token level: each token weighs M = tm * sm; sequence level: sm * tm / (row tokens + 1e-8).
    const double row_scale = cfg_.token_level_loss ? sm : sm / (row_tokens + 1e-8);
    for (int64_t t = 0; t < T; ++t) {
      const size_t n = static_cast<size_t>(b * T + t);
      const double m = tm[n] * sm;  // NeMo RL's mask, for the metrics
      const double weight = tm[n] * row_scale;
      if (tm[n] == 0 && m == 0) continue;
      const double A = d.advantages[n], prev = d.prev_logprobs[n], gen = d.generation_logprobs[n];
      const double ratio = std::exp(lp[n] - prev);
      const double clamped = std::clamp(ratio, lo, hi);
      const double l1 = -A * ratio, l2 = -A * clamped;
      double loss = std::max(l1, l2);
      // d/d lp: ratio' = ratio; the clamp passes it only inside its bounds.
      double dloss = (ratio >= lo && ratio <= hi) || l1 > l2 ? -A * ratio : 0.0;
      if (cfg_.ratio_clip_c && A < 0) {
        const double l3 = -A * *cfg_.ratio_clip_c;
        if (l3 < loss) loss = l3, dloss = 0.0;
      }
      const double w_is = finite_or_zero(std::exp(prev - gen));
      const double w = cfg_.use_importance_sampling_correction ? w_is : 1.0;
      double total = w * loss, dtotal = w * dloss;
      if (kl_on) {
        // exp(lp - gen_lp) under the on-policy approximation, else exp(lp - stopgrad(lp)) = 1:
        // either way d w / d lp = w (NaN/inf -> 0 with no gradient).
        const double kw = cfg_.use_on_policy_kl_approximation ? finite_or_zero(std::exp(lp[n] - gen)) : 1.0;
        const Kl k = kl_term(cfg_.reference_policy_kl_type, lp[n], d.reference_logprobs[n], cfg_.kl_input_clamp_value,
                             cfg_.kl_output_clamp_value, kw, kw);
        total += beta * k.value;
        dtotal += beta * k.dlp;
        kl_sum += m * k.value;
      }
      g.loss_sum += weight * total;
      dlp[n] = weight * dtotal;
      ratio_sum += m * ratio;
      clamped_sum += m * clamped;
      below += m * (ratio < lo ? 1.0 : 0.0);
      above += m * (ratio > hi ? 1.0 : 0.0);
      mult_err += m * std::exp(std::fabs(gen - prev) * m);
      gen_kl += m * kl_term(cfg_.reference_policy_kl_type, gen, prev, std::nullopt, std::nullopt).value;
      pol_kl += m * kl_term(cfg_.reference_policy_kl_type, prev, gen, std::nullopt, std::nullopt).value;
      is_sum += m * w_is;
      entropy += m * -(std::exp(lp[n] - gen) * lp[n]);
    }
  }
  g.dlogprob = Tensor::from_vector<double>({N}, dlp);
  g.metrics = {{"probs_ratio", ratio_sum / tok_norm},
               {"probs_ratio_clamped", clamped_sum / tok_norm},
               {"clip_fraction_lower", below / tok_norm},
               {"clip_fraction_upper", above / tok_norm},
               {"kl_penalty", kl_sum / tok_norm},
               {"token_mult_prob_error", mult_err / tok_norm},
               {"gen_kl_error", gen_kl / tok_norm},
               {"policy_kl_error", pol_kl / tok_norm},
               {"sampling_importance_ratio", is_sum / tok_norm},
               {"approx_entropy", entropy / tok_norm},
               {"num_valid_samples", samples}};
  return g;
}

}  // namespace nemotron::rl
