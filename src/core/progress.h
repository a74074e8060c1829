// A progress bar for long work (data prep, rollouts): "label [#####.....] 512/1000 docs
// 48.2k tok/s ETA 0:12". On a terminal it redraws one line; otherwise (logs, CI) it prints a
// plain line at most every `min_interval_s` seconds, so logs stay readable.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace nemotron {

class ProgressBar {
 public:
  // total = 0: unknown total (no bar, no ETA). `unit` names what is counted ("docs").
  ProgressBar(std::string label, int64_t total, std::string unit, std::FILE* out = stderr, double min_interval_s = 2.0);
  ~ProgressBar();
  // Advances by `n` items and `tokens` (for the rate; 0 = rate in items).
  void advance(int64_t n, int64_t tokens = 0);
  void finish();  // draws the final state with the elapsed time
  int64_t done() const { return done_; }

 private:
  void draw(bool final);
  std::string label_, unit_;
  int64_t total_, done_ = 0, tokens_ = 0;
  std::FILE* out_;
  bool tty_, finished_ = false;
  double min_interval_s_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

std::string format_duration(double seconds);  // "1:02:03", "4:05"
std::string format_rate(double per_second);    // "48.2k", "1.3M"

}  // namespace nemotron
