#include "rl/grpo_loss.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/context_split.h"
#include "rl/grpo_kl.h"

namespace nemotron::rl {

namespace {

double finite_or_zero(double v) { return std::isfinite(v) ? v : 0.0; }  // nan_to_num(0, 0, 0)

constexpr double kInf = std::numeric_limits<double>::infinity();

// This context rank's tokens of whole-row data (rows of Tw tokens): the local [B, T] rows hold
// chunks `rank` and 2C-1-rank of every row, T / 2 tokens each (train/context_batch.h's cut).
std::vector<double> context_tokens(const std::vector<double>& whole, int64_t B, int64_t T, int rank, int size) {
  if (whole.empty()) return whole;
  const int64_t Tw = T * size, half = T / 2;
  NM_CHECK(static_cast<int64_t>(whole.size()) == B * Tw, "GRPO loss: {} values for {} rows of {} tokens", whole.size(),
           B, Tw);
  const model::ContextChunks c{size, rank, half};
  std::vector<double> out(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int j = 0; j < 2; ++j)
      std::copy_n(whole.begin() + b * Tw + c.chunk(j) * half, half, out.begin() + b * T + j * half);
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
    // A row split over context ranks is one sample: its rank 0 counts it (its tokens each rank).
    const bool counts_rows = !micro[k].context_split || !context_ || context_->rank() == 0;
    for (int64_t b = 0; b < B; ++b) {
      if (counts_rows) valid_samples_ += d.sample_mask[b];
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

parallel::ReduceOp ClippedPGLoss::metric_op(const std::string& name) const {
  if (name == "probs_ratio_min" || name == "probs_ratio_clamped_min") return parallel::ReduceOp::min;
  if (name == "probs_ratio_max" || name == "probs_ratio_clamped_max") return parallel::ReduceOp::max;
  return parallel::ReduceOp::sum;
}

namespace {

// Truncated importance sampling of one weight (tis: clamp; icepop: 0 outside the bounds); sets
// *oob when the weight was outside [lo, hi]. seq-mask-tis and none leave it as it is.
double truncate_weight(const std::string& type, double w, double lo, double hi, bool* oob) {
  *oob = false;
  if (type == "tis") {
    *oob = w > hi || w < lo;
    return std::clamp(w, lo, hi);
  }
  if (type == "icepop") {
    *oob = !(w >= lo && w <= hi);
    return *oob ? 0.0 : w;
  }
  return w;
}

}  // namespace

train::TokenLossGrad ClippedPGLoss::per_token(Context& ctx, int64_t micro_index, const model::Batch& mb,
                                              const Tensor& logprobs) {
  (void)ctx;
  NM_CHECK(micro_index >= 0 && micro_index < static_cast<int64_t>(data_.size()),
           "GRPO loss: micro-batch {} but data for {}", micro_index, data_.size());
  const LossFnSection& c = cfg_;
  const std::vector<double> lp = logprobs.to_f64_vector(), tm = grpo_token_mask(mb);
  const int64_t B = mb.labels.dim(0), T = mb.labels.dim(1), N = B * T;
  // Context parallelism: this rank's chunks of the whole rows' data; the per-row sums are summed
  // over the context group (sum_rows) and per-row counts made by its rank 0 (first).
  const bool split = mb.context_split && context_ && context_->size() > 1;
  const bool first = !split || context_->rank() == 0;
  auto sum_rows = [&](std::vector<double>& v) {
    if (split) context_->all_reduce_host(v);
  };
  GrpoTokenData cut;
  if (split) {
    const GrpoTokenData& w = data_[micro_index];
    const int r = context_->rank(), C = context_->size();
    cut.advantages = context_tokens(w.advantages, B, T, r, C);
    cut.prev_logprobs = context_tokens(w.prev_logprobs, B, T, r, C);
    cut.generation_logprobs = context_tokens(w.generation_logprobs, B, T, r, C);
    cut.reference_logprobs = context_tokens(w.reference_logprobs, B, T, r, C);
    cut.sample_mask = w.sample_mask, cut.rewards = w.rewards;
  }
  const GrpoTokenData& d = split ? cut : data_[micro_index];
  // force_on_policy_ratio: prev = stopgrad(lp), so the trainer's prev log-probs are not read.
  const bool force = c.force_on_policy_ratio;
  NM_CHECK(static_cast<int64_t>(lp.size()) == N && static_cast<int64_t>(d.advantages.size()) == N &&
               (force || static_cast<int64_t>(d.prev_logprobs.size()) == N) &&
               static_cast<int64_t>(d.generation_logprobs.size()) == N &&
               static_cast<int64_t>(d.sample_mask.size()) == B &&
               (d.rewards.empty() || static_cast<int64_t>(d.rewards.size()) == B),
           "GRPO loss: micro-batch {} is [{}, {}] but its data has {} advantages, {} prev / {} generation "
           "log-probs, {} sample masks, {} rewards",
           micro_index, B, T, d.advantages.size(), d.prev_logprobs.size(), d.generation_logprobs.size(),
           d.sample_mask.size(), d.rewards.size());
  const double beta = c.loss_kl_penalty();
  const bool kl_on = beta != 0;
  NM_CHECK(!kl_on || static_cast<int64_t>(d.reference_logprobs.size()) == N,
           "GRPO loss: reference_policy_kl_penalty is {} but micro-batch {} has {} reference log-probs for {} tokens",
           beta, micro_index, d.reference_logprobs.size(), N);
  const double lo = 1.0 - c.ratio_clip_min, hi = 1.0 + c.ratio_clip_max;
  const std::string& tis = c.truncated_importance_sampling_type;
  const double tis_lo = c.truncated_importance_sampling_ratio_min.value_or(0.0);
  const double tis_hi = c.truncated_importance_sampling_ratio.value_or(kInf);
  const bool seq_ratio = c.sequence_level_importance_ratios && !force && !c.disable_ppo_ratio;
  const bool seq_is = c.sequence_level_importance_ratios;
  // Metrics are means over the global batch's tokens or sequences; the step's normaliser is one of them.
  const double tok_norm = valid_tokens_ > 0 ? valid_tokens_ : 1.0, seq_norm = valid_samples_ > 0 ? valid_samples_ : 1.0;
  const double loss_norm = c.token_level_loss ? valid_tokens_ : valid_samples_;
  auto prev_of = [&](size_t n) { return force ? lp[n] : d.prev_logprobs[n]; };

  // VAPO's NLL: over this micro-batch's trained tokens of rows with reward > 0, normalised by their
  // own count; in the numerator it is scaled by the step's normaliser, which the step divides by.
  const double mu = c.positive_example_nll_weight;
  const bool nll_on = mu > 0 && !d.rewards.empty();
  // The per-row sums first (over the whole rows: summed over the context group): the token mask's
  // and GSPO's / seq-mask-tis's log sums, [4 B], then the NLL's token count.
  const bool row_sums = seq_ratio || seq_is || tis == "seq-mask-tis";
  std::vector<double> rs(static_cast<size_t>(4 * B + 1), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const double sm = d.sample_mask[b];
    for (int64_t t = 0; t < T; ++t) {
      const size_t n = static_cast<size_t>(b * T + t);
      rs[b] += tm[n];
      if (nll_on) rs[4 * B] += tm[n] * sm * (d.rewards[b] > 0 ? 1 : 0);
      if (!row_sums || tm[n] == 0) continue;
      const double pv = prev_of(n), gen = d.generation_logprobs[n];
      rs[B + b] += tm[n] * (lp[n] - pv);
      rs[2 * B + b] += tm[n] * sm * (pv - gen);
      rs[3 * B + b] += tm[n] * finite_or_zero(pv - gen);
    }
  }
  sum_rows(rs);
  const double correct_tokens = rs[4 * B];
  const double nll_scale = correct_tokens > 0 ? mu * loss_norm / (correct_tokens + 1e-8) : 0.0;

  train::TokenLossGrad g;
  std::vector<double> dlp(static_cast<size_t>(N), 0.0);
  double ratio_sum = 0, clamped_sum = 0, below = 0, above = 0, kl_sum = 0, mult_err = 0, gen_kl = 0, pol_kl = 0,
         js = 0, is_sum = 0, oob = 0, entropy = 0, samples = 0, nll_sum = 0;
  double r_min = kInf, r_max = -kInf, c_min = kInf, c_max = -kInf;
  std::vector<double> d_row_ratio(static_cast<size_t>(B), 0.0);  // d numerator / d row_ratio (GSPO)
  std::vector<double> row_ratios(static_cast<size_t>(B), 1.0);
  for (int64_t b = 0; b < B; ++b) {
    const double sm = d.sample_mask[b];
    if (first) samples += sm;
    const double row_tokens = rs[b];
    const double inv_row = 1.0 / (row_tokens + 1e-8);  // NeMo RL's masked_mean over the token mask
    // Token level: each token weighs M = tm * sm; sequence level: sm * tm / (row tokens + 1e-8).
    const double row_scale = c.token_level_loss ? sm : sm * inv_row;
    // Per-row quantities: GSPO's ratio and weight, seq-mask-tis's keep flag.
    double row_ratio = 1, row_w = 1, row_keep = 1;
    bool row_oob = false;
    if (row_sums) {
      row_ratio = std::exp(rs[B + b] * inv_row);
      row_w = truncate_weight(tis, finite_or_zero(std::exp(rs[2 * B + b])), tis_lo, tis_hi, &row_oob);
      if (tis == "seq-mask-tis") {
        const double geo = std::exp(rs[3 * B + b] * inv_row);
        row_keep = geo >= tis_lo && geo <= tis_hi ? 1.0 : 0.0;
        if (first) oob += sm * (1 - row_keep);
      }
      if (seq_is && first) is_sum += sm * row_w * row_keep;
    }
    row_ratios[b] = row_ratio;
    for (int64_t t = 0; t < T; ++t) {
      const size_t n = static_cast<size_t>(b * T + t);
      if (tm[n] == 0) continue;
      const double m = tm[n] * sm;  // NeMo RL's mask, for the metrics
      const double weight = tm[n] * row_scale;
      const double A = d.advantages[n], pv = prev_of(n), gen = d.generation_logprobs[n];
      // The ratio r, d r / d lp (GSPO's goes through the row), its clamp and whether one applies.
      double r, dr = 1;
      bool clamps = true;
      if (force) {
        r = 1.0, clamps = false;  // exp(lp - stopgrad(lp)): d/dlp = 1
      } else if (c.disable_ppo_ratio) {
        r = lp[n], clamps = false;
      } else if (seq_ratio) {
        r = row_ratio, dr = 0;
      } else {
        r = std::exp(lp[n] - pv), dr = r;
      }
      const double cl = clamps ? std::clamp(r, lo, hi) : r;
      const bool inside = !clamps || (r >= lo && r <= hi);
      double l, dl_dr = 0, dl_dlp = 0;
      if (c.use_cispo) {
        l = -A * cl * lp[n], dl_dlp = -A * cl;  // the clamped ratio is a constant
      } else {
        const double l1 = -A * r, l2 = -A * cl;
        l = std::max(l1, l2);
        dl_dr = inside || l1 > l2 ? -A : 0.0;
      }
      if (c.ratio_clip_c && A < 0) {
        const double l3 = -A * *c.ratio_clip_c;
        if (l3 < l) l = l3, dl_dr = dl_dlp = 0.0;
      }
      // The importance weight (a constant), truncated.
      bool tok_oob = row_oob;
      double w = row_w;
      if (!seq_is) w = truncate_weight(tis, finite_or_zero(std::exp(pv - gen)), tis_lo, tis_hi, &tok_oob);
      w *= row_keep;
      if (tis == "tis" || tis == "icepop") oob += m * (tok_oob ? 1.0 : 0.0);
      const double wl = c.use_importance_sampling_correction ? w : 1.0;
      double total = wl * l, dtotal = wl * (dl_dr * dr + dl_dlp);
      d_row_ratio[b] += weight * wl * dl_dr;
      if (kl_on) {
        // exp(lp - gen_lp) under the on-policy approximation, else exp(lp - stopgrad(lp)) = 1:
        // either way d w / d lp = w (NaN/inf -> 0 with no gradient).
        const double kw = c.use_on_policy_kl_approximation ? finite_or_zero(std::exp(lp[n] - gen)) : 1.0;
        const KlTerm k = kl_term(c.reference_policy_kl_type, lp[n], d.reference_logprobs[n], c.kl_input_clamp_value,
                                 c.kl_output_clamp_value, kw, kw);
        total += beta * k.value;
        dtotal += beta * k.dlp;
        kl_sum += weight * k.value;
      }
      g.loss_sum += weight * total;
      dlp[n] = weight * dtotal;
      if (nll_on && d.rewards[b] > 0) {
        g.loss_sum += nll_scale * m * -lp[n];
        dlp[n] -= nll_scale * m;
        nll_sum += m * -lp[n];
      }
      ratio_sum += m * r;
      clamped_sum += m * cl;
      if (m != 0) {
        r_min = std::min(r_min, r), r_max = std::max(r_max, r);
        c_min = std::min(c_min, cl), c_max = std::max(c_max, cl);
      }
      below += m * (clamps && r < lo ? 1.0 : 0.0);
      above += m * (clamps && r > hi ? 1.0 : 0.0);
      mult_err += m * std::exp(std::fabs(gen - pv) * m);
      gen_kl += m * kl_term(c.reference_policy_kl_type, gen, pv, std::nullopt, std::nullopt).value;
      pol_kl += m * kl_term(c.reference_policy_kl_type, pv, gen, std::nullopt, std::nullopt).value;
      // Jensen-Shannon through the mixture M = (p_prev + p_gen) / 2, each KL as k3 against it.
      const double lmix = std::log(0.5 * std::exp(pv) + 0.5 * std::exp(gen));
      const double kp = std::exp(pv - lmix) - (pv - lmix) - 1, kg = std::exp(gen - lmix) - (gen - lmix) - 1;
      js += m * 0.5 * (kp + kg);
      if (!seq_is) is_sum += m * w;
      entropy += m * -(std::exp(lp[n] - gen) * lp[n]);
    }
  }
  if (seq_ratio) {  // d row_ratio / d lp_t = row_ratio * tm_t / (row tokens + 1e-8), over the whole row
    sum_rows(d_row_ratio);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t)
        dlp[static_cast<size_t>(b * T + t)] += d_row_ratio[b] * row_ratios[b] * tm[b * T + t] / (rs[b] + 1e-8);
  }
  g.dlogprob = Tensor::from_vector<double>({N}, dlp);
  g.metrics = {{"probs_ratio", ratio_sum / tok_norm},
               {"probs_ratio_clamped", clamped_sum / tok_norm},
               {"probs_ratio_min", r_min},
               {"probs_ratio_max", r_max},
               {"probs_ratio_clamped_min", c_min},
               {"probs_ratio_clamped_max", c_max},
               {"clip_fraction_lower", below / tok_norm},
               {"clip_fraction_upper", above / tok_norm},
               {"kl_penalty", kl_sum / (c.token_level_loss ? tok_norm : seq_norm)},
               {"token_mult_prob_error", mult_err / tok_norm},
               {"gen_kl_error", gen_kl / tok_norm},
               {"policy_kl_error", pol_kl / tok_norm},
               {"js_divergence_error", js / tok_norm},
               {"sampling_importance_ratio", is_sum / (seq_is ? seq_norm : tok_norm)},
               {"approx_entropy", entropy / tok_norm},
               {"num_valid_samples", samples},
               {"positive_nll_loss", correct_tokens > 0 ? nll_sum / (correct_tokens + 1e-8) : 0.0}};
  if (!tis.empty()) g.metrics["is_oob_ratio"] = oob / (tis == "seq-mask-tis" ? seq_norm : tok_norm);
  return g;
}

}  // namespace nemotron::rl
