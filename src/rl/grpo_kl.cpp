#include "rl/grpo_kl.h"

#include <algorithm>
#include <cmath>

namespace nemotron::rl {

KlTerm kl_term(const std::string& type, double lp, double ref, std::optional<double> in_clamp,
               std::optional<double> out_clamp, double w, double dw) {
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
  KlTerm out{w * k, dw * k + w * dk * dlogr};
  if (out_clamp && (out.value > *out_clamp || out.value < -*out_clamp))
    out.value = std::clamp(out.value, -*out_clamp, *out_clamp), out.dlp = 0;
  return out;
}

}  // namespace nemotron::rl
