#include "rl/grpo_advantages.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"

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
                                        bool leave_one_out) {
  NM_CHECK(rewards.size() == group.size(), "{} rewards for {} group ids", rewards.size(), group.size());
  const size_t n = rewards.size();
  std::map<int64_t, std::vector<size_t>> rows;
  for (size_t i = 0; i < n; ++i) rows[group[i]].push_back(i);
  BaselineStd out{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (const auto& [id, idx] : rows) {
    (void)id;
    if (idx.size() <= 1) {  // nothing to compare with: the row's own reward, zero advantage
      for (size_t i : idx) out.baseline[i] = rewards[i];
      continue;
    }
    double sum = 0, sum_sq = 0;
    for (size_t i : idx) sum += rewards[i], sum_sq += rewards[i] * rewards[i];
    const double m = static_cast<double>(idx.size()) - (leave_one_out ? 1.0 : 0.0);
    for (size_t i : idx) {
      const double own = leave_one_out ? rewards[i] : 0.0;
      const double b = (sum - own) / m, b_sq = (sum_sq - own * own) / m;
      // m = 1 (two rows, leave-one-out): (0 * inf) = NaN -> 0, as nan_to_num(0) does there.
      double var = (b_sq - b * b) * (m / (m - 1));
      double s = std::sqrt(var);
      if (std::isnan(s)) s = 0.0;
      out.baseline[i] = b;
      out.std[i] = s;
    }
  }
  return out;
}

std::vector<double> grpo_advantages(const std::vector<double>& rewards, const std::vector<int64_t>& group,
                                    bool leave_one_out, bool normalize) {
  const BaselineStd bs = baseline_and_std_per_prompt(rewards, group, leave_one_out);
  std::vector<double> a(rewards.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = rewards[i] - bs.baseline[i];
    if (normalize && bs.std[i] > 0) a[i] /= bs.std[i] + 1e-6;
  }
  return a;
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
