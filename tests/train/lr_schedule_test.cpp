// The learning-rate schedule against values computed by hand from reference/pipeline-and-rl.md
// §6.2 (sample-based steps, warmup capped, WSD anneal styles), including the super3 phase-1
// worked example.
#include "train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace nemotron::train {
namespace {

// max 1e-3, min 1e-4, warmup 2 iterations, decay over 10, global batch 4: W = 8, Dk = 40 samples.
LrSchedule small(LrDecayStyle style, WsdDecayStyle wsd = WsdDecayStyle::exponential, int64_t wsd_iters = 0) {
  LrScheduleIters s;
  s.max_lr = 1e-3, s.min_lr = 1e-4, s.warmup_iters = 2, s.train_iters = 10, s.global_batch_size = 4;
  s.style = style, s.wsd_style = wsd, s.wsd_decay_iters = wsd_iters;
  return lr_schedule_from_iters(s);
}

TEST(LrSchedule, steps_are_samples_iterations_times_global_batch) {
  LrSchedule s = small(LrDecayStyle::linear);
  EXPECT_EQ(s.warmup_steps, 8);
  EXPECT_EQ(s.decay_steps, 40);
  EXPECT_EQ(s.wsd_decay_steps, 40);  // default: the whole decay
}

TEST(LrSchedule, warmup_is_linear_from_warmup_init) {
  LrSchedule s = small(LrDecayStyle::cosine);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(2), 2.5e-4);
  EXPECT_DOUBLE_EQ(s.lr(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.lr(8), 1e-3);  // n == W is still warmup and reaches max_lr
  s.warmup_init = 1e-4;
  EXPECT_DOUBLE_EQ(s.lr(0), 1e-4);
  EXPECT_DOUBLE_EQ(s.lr(4), 1e-4 + 9e-4 * 0.5);
}

TEST(LrSchedule, linear_and_cosine_decay_then_min_lr) {
  LrSchedule lin = small(LrDecayStyle::linear), cos = small(LrDecayStyle::cosine);
  // rho = (n - 8) / 32.
  EXPECT_NEAR(lin.lr(24), 1e-4 + 0.5 * 9e-4, 1e-18);   // rho 1/2
  EXPECT_NEAR(lin.lr(16), 1e-4 + 0.75 * 9e-4, 1e-18);  // rho 1/4
  EXPECT_NEAR(lin.lr(40), 1e-4, 1e-18);                // rho 1
  EXPECT_NEAR(cos.lr(24), 1e-4 + 0.5 * 9e-4, 1e-18);
  EXPECT_NEAR(cos.lr(16), 1e-4 + 0.5 * (1 + std::sqrt(0.5)) * 9e-4, 1e-18);  // cos(pi/4)
  EXPECT_NEAR(cos.lr(40), 1e-4, 1e-18);
  EXPECT_DOUBLE_EQ(lin.lr(41), 1e-4);
  EXPECT_DOUBLE_EQ(cos.lr(1000), 1e-4);
}

TEST(LrSchedule, constant_ignores_the_decay_and_inverse_sqrt_is_floored) {
  LrSchedule c = small(LrDecayStyle::constant);
  EXPECT_DOUBLE_EQ(c.lr(4), 5e-4);  // still warms up
  EXPECT_DOUBLE_EQ(c.lr(9), 1e-3);
  EXPECT_DOUBLE_EQ(c.lr(10000), 1e-3);
  LrScheduleIters i;
  i.max_lr = 1e-3, i.min_lr = 1e-4, i.warmup_iters = 2, i.train_iters = 1000, i.global_batch_size = 4;
  i.style = LrDecayStyle::inverse_square_root;
  LrSchedule s = lr_schedule_from_iters(i);                             // W = 8
  EXPECT_DOUBLE_EQ(s.lr(32), 1e-3 * std::sqrt(8.0) / std::sqrt(32.0));  // = 5e-4
  EXPECT_NEAR(s.lr(32), 5e-4, 1e-18);
  EXPECT_DOUBLE_EQ(s.lr(3200), 1e-4);  // max_lr sqrt(8/3200) = 5e-5 < min_lr
  EXPECT_DOUBLE_EQ(s.lr(4001), 1e-4);  // past the decay: min_lr
}

TEST(LrSchedule, wsd_holds_then_anneals_in_each_style) {
  // Wd = 4 iterations = 16 samples: the anneal starts at A = 40 - 16 = 24; q = (n - 24) / 16.
  const double d = 9e-4;
  for (WsdDecayStyle st :
       {WsdDecayStyle::linear, WsdDecayStyle::cosine, WsdDecayStyle::exponential, WsdDecayStyle::minus_sqrt}) {
    LrSchedule s = small(LrDecayStyle::wsd, st, 4);
    SCOPED_TRACE(wsd_decay_style_name(st));
    EXPECT_EQ(s.anneal_start(), 24);
    EXPECT_DOUBLE_EQ(s.lr(9), 1e-3);   // stable right after warmup
    EXPECT_DOUBLE_EQ(s.lr(24), 1e-3);  // and up to the anneal start
    EXPECT_NEAR(s.lr(40), 1e-4, 1e-18);
    EXPECT_DOUBLE_EQ(s.lr(41), 1e-4);
  }
  EXPECT_NEAR(small(LrDecayStyle::wsd, WsdDecayStyle::linear, 4).lr(28), 1e-4 + 0.75 * d, 1e-18);
  EXPECT_NEAR(small(LrDecayStyle::wsd, WsdDecayStyle::cosine, 4).lr(28), 1e-4 + 0.5 * (1 + std::sqrt(0.5)) * d, 1e-18);
  // 2 * 0.5^0.25 - 1 = 0.68179283050742908...
  EXPECT_NEAR(small(LrDecayStyle::wsd, WsdDecayStyle::exponential, 4).lr(28), 1e-4 + 0.681792830507429 * d, 1e-17);
  EXPECT_NEAR(small(LrDecayStyle::wsd, WsdDecayStyle::minus_sqrt, 4).lr(28), 1e-4 + 0.5 * d, 1e-18);
}

TEST(LrSchedule, warmup_longer_than_the_decay_is_capped) {
  LrScheduleIters i;
  i.max_lr = 1e-3, i.warmup_iters = 20, i.train_iters = 10, i.global_batch_size = 4;
  LrSchedule s = lr_schedule_from_iters(i);
  EXPECT_EQ(s.warmup_steps, 39);
  EXPECT_DOUBLE_EQ(s.lr(39), 1e-3);
  i.warmup_iters = 0, i.warmup_fraction = 0.25;  // fraction of the decay steps
  EXPECT_EQ(lr_schedule_from_iters(i).warmup_steps, 10);
}

// reference/pipeline-and-rl.md §6.2: warmup 7,949 iterations, lr_decay_iters 992,411,
// lr_wsd_decay_iters 198,682, so the anneal starts at iteration 793,729 and follows 1 - sqrt(q).
// lr 4.5e-4 -> 4.5e-6 as in the Super preset; global batch 1024.
TEST(LrSchedule, super3_phase1_worked_example) {
  LrScheduleIters i;
  i.max_lr = 4.5e-4, i.min_lr = 4.5e-6, i.warmup_iters = 7949, i.decay_iters = 992411, i.wsd_decay_iters = 198682;
  i.train_iters = 993404, i.global_batch_size = 1024;
  i.style = LrDecayStyle::wsd, i.wsd_style = WsdDecayStyle::minus_sqrt;
  LrSchedule s = lr_schedule_from_iters(i);
  const int64_t G = 1024;
  EXPECT_EQ(s.anneal_start(), 793729 * G);
  EXPECT_DOUBLE_EQ(s.lr(G), 4.5e-4 / 7949);    // first warmup iteration
  EXPECT_DOUBLE_EQ(s.lr(7949 * G), 4.5e-4);    // end of warmup
  EXPECT_DOUBLE_EQ(s.lr(500000 * G), 4.5e-4);  // stable
  EXPECT_DOUBLE_EQ(s.lr(793729 * G), 4.5e-4);  // last stable sample
  // One iteration into the anneal: q = 1/198682, lr = 4.5e-6 + (1 - sqrt(q)) * 4.455e-4
  // = 4.5e-4 - 4.455e-4 * 0.00224347... = 4.490005e-4 (to 7 digits).
  EXPECT_NEAR(s.lr(793730 * G), 4.490005e-4, 1e-10);
  // A quarter of the anneal (n = A + Wd/4 = 843,399.5 iterations): 1 - sqrt(1/4) = 1/2, so
  // lr = 4.5e-6 + 0.5 * 4.455e-4 = 2.2725e-4.
  EXPECT_NEAR(s.lr(863641088), 2.2725e-4, 1e-15);
  EXPECT_NEAR(s.lr(992411 * G), 4.5e-6, 1e-18);  // end of the decay
  EXPECT_DOUBLE_EQ(s.lr(993404 * G), 4.5e-6);    // last iterations: min_lr
}

}  // namespace
}  // namespace nemotron::train
