#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::train {

const char* lr_decay_style_name(LrDecayStyle s) {
  switch (s) {
    case LrDecayStyle::constant:
      return "constant";
    case LrDecayStyle::linear:
      return "linear";
    case LrDecayStyle::cosine:
      return "cosine";
    case LrDecayStyle::inverse_square_root:
      return "inverse-square-root";
    case LrDecayStyle::wsd:
      return "WSD";
  }
  return "?";
}

LrDecayStyle read_lr_decay_style(ConfigReader& r, const std::string& key, LrDecayStyle fallback,
                                 std::span<const LrDecayStyle> allowed) {
  if (!r.has(key)) return fallback;
  const std::string v = r.get_string(key, "");
  std::string list;
  for (LrDecayStyle style : allowed) {
    if (v == lr_decay_style_name(style)) return style;
    list += list.empty() ? "" : ", ";
    list += lr_decay_style_name(style);
  }
  r.fail(key, fmt::format("expected one of {}, got \"{}\"", list, v));
}

const char* wsd_decay_style_name(WsdDecayStyle s) {
  switch (s) {
    case WsdDecayStyle::exponential:
      return "exponential";
    case WsdDecayStyle::linear:
      return "linear";
    case WsdDecayStyle::cosine:
      return "cosine";
    case WsdDecayStyle::minus_sqrt:
      return "minus_sqrt";
  }
  return "?";
}

int64_t LrSchedule::anneal_start() const {
  return style == LrDecayStyle::wsd ? decay_steps - wsd_decay_steps : decay_steps;
}

double LrSchedule::lr(int64_t n) const {
  NM_CHECK(decay_steps > 0, "lr schedule: decay_steps {} must be positive", decay_steps);
  const double nd = static_cast<double>(n);
  if (warmup_steps > 0 && n <= warmup_steps)
    return warmup_init + (max_lr - warmup_init) * nd / static_cast<double>(warmup_steps);
  if (style == LrDecayStyle::constant) return max_lr;
  if (n > decay_steps) return min_lr;
  if (style == LrDecayStyle::inverse_square_root) {
    double w = static_cast<double>(std::max<int64_t>(warmup_steps, 1)),
           s = static_cast<double>(std::max<int64_t>(n, 1));
    return std::max(min_lr, max_lr * std::sqrt(w) / std::sqrt(s));
  }
  const double rho = static_cast<double>(n - warmup_steps) / static_cast<double>(decay_steps - warmup_steps);
  double c = 1.0;
  switch (style) {
    case LrDecayStyle::linear:
      c = 1.0 - rho;
      break;
    case LrDecayStyle::cosine:
      c = 0.5 * (std::cos(std::numbers::pi * rho) + 1.0);
      break;
    case LrDecayStyle::wsd: {
      const int64_t a = decay_steps - wsd_decay_steps;
      if (n <= a) break;
      const double q = static_cast<double>(n - a) / static_cast<double>(wsd_decay_steps);
      switch (wsd_style) {
        case WsdDecayStyle::linear:
          c = 1.0 - q;
          break;
        case WsdDecayStyle::cosine:
          c = 0.5 * (std::cos(std::numbers::pi * q) + 1.0);
          break;
        case WsdDecayStyle::exponential:
          c = 2.0 * std::pow(0.5, q) - 1.0;
          break;
        case WsdDecayStyle::minus_sqrt:
          c = 1.0 - std::sqrt(q);
          break;
      }
      break;
    }
    default:
      break;
  }
  return min_lr + c * (max_lr - min_lr);
}

LrSchedule lr_schedule_from_iters(const LrScheduleIters& s) {
  NM_CHECK(s.global_batch_size > 0 && s.train_iters > 0, "lr schedule: global_batch_size {} and train_iters {}",
           s.global_batch_size, s.train_iters);
  LrSchedule out;
  out.max_lr = s.max_lr;
  out.min_lr = s.min_lr;
  out.warmup_init = s.warmup_init;
  out.style = s.style;
  out.wsd_style = s.wsd_style;
  out.decay_steps = (s.decay_iters > 0 ? s.decay_iters : s.train_iters) * s.global_batch_size;
  out.warmup_steps = s.warmup_fraction >= 0
                         ? static_cast<int64_t>(s.warmup_fraction * static_cast<double>(out.decay_steps))
                         : s.warmup_iters * s.global_batch_size;
  if (out.warmup_steps >= out.decay_steps) out.warmup_steps = out.decay_steps - 1;
  out.wsd_decay_steps = s.wsd_decay_iters > 0 ? s.wsd_decay_iters * s.global_batch_size : out.decay_steps;
  return out;
}

}  // namespace nemotron::train
