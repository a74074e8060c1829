// The per-token KL estimators NeMo RL's calculate_kl computes (nemo_rl/algorithms/utils.py; Schulman's
// k1/k2/k3, http://joschu.net/blog/kl-approx.html), with their clamps and an optional importance
// weight, as value and derivative. Used by the GRPO loss and by reinforce++'s KL-in-reward.
#pragma once
#include <optional>
#include <string>

namespace nemotron::rl {

struct KlTerm {
  double value = 0, dlp = 0;  // the estimate and its derivative with respect to lp
};

// logr = clamp(ref - lp, +-in_clamp), k1 = -logr, k2 = logr^2 / 2, k3 = exp(logr) - 1 - logr, value
// clamp(w * k, +-out_clamp). `dw` is d w / d lp (the weight's own gradient, the score-function
// term); where the input clamp is active the weight is detached (and k is constant), where the
// output clamp is active nothing passes. `type` is k1, k2 or k3 (validated by the config).
KlTerm kl_term(const std::string& type, double lp, double ref, std::optional<double> in_clamp,
               std::optional<double> out_clamp, double w = 1.0, double dw = 0.0);

}  // namespace nemotron::rl
