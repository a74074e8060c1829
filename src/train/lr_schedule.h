// The learning-rate schedule of Megatron's OptimizerParamScheduler, counted in samples as
// Megatron-Bridge drives it (reference/pipeline-and-rl.md §6.2): warmup, then constant, linear,
// cosine, inverse-square-root or WSD (warmup-stable-decay with an exponential, linear, cosine or
// minus_sqrt anneal). The update of iteration i uses lr(n) with n = samples consumed before it,
// (i - 1) * global_batch_size, as Megatron does (its scheduler steps after the update).
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace nemotron {
class ConfigReader;
}

namespace nemotron::train {

enum class LrDecayStyle { constant, linear, cosine, inverse_square_root, wsd };
enum class WsdDecayStyle { exponential, linear, cosine, minus_sqrt };

// Names as Megatron spells them: "constant", "linear", "cosine", "inverse-square-root", "WSD";
// "exponential", "linear", "cosine", "minus_sqrt". Unknown names are InputErrors from the config.
const char* lr_decay_style_name(LrDecayStyle s);
const char* wsd_decay_style_name(WsdDecayStyle s);

inline constexpr LrDecayStyle kLrDecayStyles[] = {LrDecayStyle::constant, LrDecayStyle::linear, LrDecayStyle::cosine,
                                                  LrDecayStyle::inverse_square_root, LrDecayStyle::wsd};

// The style a config names under `key` (Megatron's spelling), or `fallback` when the key is absent;
// a name outside `allowed` fails naming the key and the accepted names. Shared by the training
// loop's `scheduler:` and GRPO's `policy.optimizer` (which allows the styles its schedule runs).
LrDecayStyle read_lr_decay_style(ConfigReader& r, const std::string& key, LrDecayStyle fallback,
                                 std::span<const LrDecayStyle> allowed = kLrDecayStyles);

// All step counts in samples.
struct LrSchedule {
  double max_lr = 0, min_lr = 0, warmup_init = 0;
  int64_t warmup_steps = 0;     // W
  int64_t decay_steps = 0;      // Dk (> 0)
  int64_t wsd_decay_steps = 0;  // Wd (WSD only, 0 < Wd <= Dk)
  LrDecayStyle style = LrDecayStyle::linear;
  WsdDecayStyle wsd_style = WsdDecayStyle::exponential;

  // The learning rate after `samples` consumed samples (the formulas of §6.2, in Megatron's order).
  double lr(int64_t samples) const;
  // Sample count at which the WSD anneal starts (Dk - Wd); decay_steps for other styles.
  int64_t anneal_start() const;
};

// From iteration counts as the recipes give them (Bridge: steps = iters * global_batch_size).
struct LrScheduleIters {
  double max_lr = 0, min_lr = 0, warmup_init = 0;
  int64_t warmup_iters = 0;
  double warmup_fraction = -1;  // >= 0: warmup = fraction * decay steps (instead of warmup_iters)
  int64_t decay_iters = 0;      // <= 0: train_iters
  int64_t wsd_decay_iters = 0;  // <= 0: the whole decay
  int64_t train_iters = 0;
  int64_t global_batch_size = 0;
  LrDecayStyle style = LrDecayStyle::linear;
  WsdDecayStyle wsd_style = WsdDecayStyle::exponential;
};
// A warmup that would reach the end of the decay is capped to decay - 1 samples (Bridge).
LrSchedule lr_schedule_from_iters(const LrScheduleIters& s);

}  // namespace nemotron::train
