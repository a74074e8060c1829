#include "rl/grpo_advantages.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "rl/grpo_kl.h"

namespace nemotron::rl {

std::vector<int64_t> group_by_prompt(const std::vector<std::vector<int32_t>>& prompts) {
  std::map<std::vector<int32_t>, int64_t> ids;
  std::vector<int64_t> group(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto [it, added] = ids.try_emplace(prompts[i], static_cast<int64_t>(ids.size()));
    group[i] = it->second;
  }
  return group;
}

BaselineStd baseline_and_std_per_prompt(const std::vector<double>& rewards, const std::vector<int64_t>& group,
                                        bool leave_one_out, const std::vector<bool>& valid) {
  NM_CHECK(rewards.size() == group.size(), "{} rewards for {} group ids", rewards.size(), group.size());
  NM_CHECK(valid.empty() || valid.size() == rewards.size(), "{} valid flags for {} rewards", valid.size(),
           rewards.size());
  const size_t n = rewards.size();
  std::map<int64_t, std::vector<size_t>> rows;  // the valid rows of each group
  BaselineStd out{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (size_t i = 0; i < n; ++i) {
    if (valid.empty() || valid[i]) rows[group[i]].push_back(i);
    else out.baseline[i] = rewards[i];  // an invalid row: zero advantage, in no one's baseline
  }
  for (const auto& [id, idx] : rows) {
    (void)id;
    if (idx.size() <= 1) {  // nothing to compare with: the row's own reward, zero advantage
      for (size_t i : idx) out.baseline[i] = rewards[i];
      continue;
    }
    // NeMo RL's b_i and std_i (reference §2.4) with the rewards shifted by one of them first: its
    // one-pass form (sum_sq / m - b^2) leaves ~1e-17 of rounding where the other rewards are all
    // equal but not exactly representable (0.2, 0.2, ...), and A / (std + 1e-6) then scales the
    // advantage by ~1e6 instead of leaving it raw (std = 0). Shifted, equal rewards are exactly 0
    // apart, so their std is exactly 0. Same value otherwise.
    const double m = static_cast<double>(idx.size()) - (leave_one_out ? 1.0 : 0.0);
    for (size_t i : idx) {
      const size_t ref = leave_one_out && idx[0] == i ? idx[1] : idx[0];
      double mean_d = 0;
      for (size_t j : idx)
        if (!leave_one_out || j != i) mean_d += rewards[j] - rewards[ref];
      mean_d /= m;
      double sq = 0;
      for (size_t j : idx)
        if (!leave_one_out || j != i) sq += (rewards[j] - rewards[ref] - mean_d) * (rewards[j] - rewards[ref] - mean_d);
      // m = 1 (two rows, leave-one-out): 0 / 0 = NaN -> 0, as nan_to_num(0) does there.
      double s = std::sqrt(sq / (m - 1));
      if (!std::isfinite(s)) s = 0.0;
      out.baseline[i] = rewards[ref] + mean_d;
      out.std[i] = s;
    }
  }
  return out;
}

std::vector<double> grpo_advantages(const std::vector<double>& rewards, const std::vector<int64_t>& group,
                                    bool leave_one_out, bool normalize, const std::vector<bool>& valid) {
  const BaselineStd bs = baseline_and_std_per_prompt(rewards, group, leave_one_out, valid);
  std::vector<double> a(rewards.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = rewards[i] - bs.baseline[i];
    if (normalize && bs.std[i] > 0) a[i] /= bs.std[i] + 1e-6;
  }
  return a;
}

void reinforce_plus_plus_token_advantages(std::vector<TokenAdvantages>& parts, double kl_coef,
                                          const std::string& kl_type, parallel::Communicator* group) {
  std::vector<double> s{0, 0};  // sum of mask * a, sum of mask
  for (TokenAdvantages& p : parts) {
    std::vector<double>& a = *p.advantages;
    NM_CHECK(p.mask.size() == a.size() && (kl_coef == 0 || (p.prev->size() == a.size() && p.ref->size() == a.size())),
             "reinforce++: {} advantages, {} mask values", a.size(), p.mask.size());
    for (size_t n = 0; n < a.size(); ++n) {
      if (p.mask[n] == 0) continue;  // NeMo RL computes every position; only these are read
      if (kl_coef != 0) a[n] -= kl_coef * kl_term(kl_type, (*p.prev)[n], (*p.ref)[n], 20.0, 10.0).value;
      s[0] += p.mask[n] * a[n], s[1] += p.mask[n];
    }
  }
  if (group) group->all_reduce_host(s);
  if (!(s[1] > 0)) return;
  const double mean = s[0] / s[1];
  std::vector<double> v{0};
  for (const TokenAdvantages& p : parts)
    for (size_t n = 0; n < p.mask.size(); ++n) v[0] += p.mask[n] * ((*p.advantages)[n] - mean) * ((*p.advantages)[n] - mean);
  if (group) group->all_reduce_host(v);
  const double rstd = 1.0 / std::sqrt(std::max(v[0] / s[1], 1e-8));
  for (TokenAdvantages& p : parts)
    for (size_t n = 0; n < p.mask.size(); ++n)
      if (p.mask[n] != 0) (*p.advantages)[n] = ((*p.advantages)[n] - mean) * rstd;
}

void scale_rewards(const RewardScaling& cfg, std::vector<double>& rewards) {
  if (!cfg.enabled) return;
  for (double& r : rewards) {
    const double c = std::clamp(r, cfg.source_min, cfg.source_max);
    r = cfg.target_min + (c - cfg.source_min) / (cfg.source_max - cfg.source_min) * (cfg.target_max - cfg.target_min);
  }
}

void shape_rewards(const RewardShaping& cfg, std::vector<double>& rewards, const std::vector<int64_t>& response_length,
                   const std::vector<bool>& truncated) {
  if (!cfg.enabled) return;
  NM_CHECK(response_length.size() == rewards.size() && truncated.size() == rewards.size(),
           "reward shaping: {} rewards, {} lengths, {} truncation flags", rewards.size(), response_length.size(),
           truncated.size());
  for (size_t i = 0; i < rewards.size(); ++i) {
    if (cfg.stop_properly_penalty_coef) {
      if (truncated[i]) rewards[i] *= *cfg.stop_properly_penalty_coef;
    } else if (cfg.overlong_buffer_length > 0) {
      const double expected = static_cast<double>(cfg.max_response_length - cfg.overlong_buffer_length);
      const double over = (static_cast<double>(response_length[i]) - expected) /
                          static_cast<double>(cfg.overlong_buffer_length) * cfg.overlong_buffer_penalty;
      rewards[i] += std::min(0.0, -over);
    }
  }
}

}  // namespace nemotron::rl
