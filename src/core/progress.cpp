#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace nemotron {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto t = static_cast<int64_t>(s + 0.5);
  int64_t h = t / 3600, m = (t / 60) % 60, sec = t % 60;
  return h > 0 ? fmt::format("{}:{:02d}:{:02d}", h, m, sec) : fmt::format("{}:{:02d}", m, sec);
}

std::string format_rate(double r) {
  if (r >= 1e9) return fmt::format("{:.1f}G", r / 1e9);
  if (r >= 1e6) return fmt::format("{:.1f}M", r / 1e6);
  if (r >= 1e3) return fmt::format("{:.1f}k", r / 1e3);
  return fmt::format("{:.0f}", r);
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::string unit, std::FILE* out, double min_interval_s)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), out_(out),
      tty_(out != nullptr && ::isatty(::fileno(out))), min_interval_s_(min_interval_s),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

ProgressBar::~ProgressBar() {
  if (!finished_ && done_ > 0) finish();
}

void ProgressBar::advance(int64_t n, int64_t tokens) {
  done_ += n;
  tokens_ += tokens;
  auto now = std::chrono::steady_clock::now();
  double since = std::chrono::duration<double>(now - last_draw_).count();
  if (since >= (tty_ ? 0.1 : min_interval_s_)) draw(false), last_draw_ = now;
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void ProgressBar::draw(bool final) {
  if (!out_) return;
  double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = el > 0 ? static_cast<double>(tokens_ > 0 ? tokens_ : done_) / el : 0.0;
  std::string what = tokens_ > 0 ? "tok/s" : unit_ + "/s";
  std::string bar;
  if (total_ > 0) {
    constexpr int kWidth = 24;
    int filled = static_cast<int>(kWidth * std::min<double>(1.0, static_cast<double>(done_) / static_cast<double>(total_)));
    bar.append(1, '[').append(static_cast<size_t>(filled), '#').append(static_cast<size_t>(kWidth - filled), '.').append("] ");
  }
  std::string count = total_ > 0 ? fmt::format("{}/{} {}", done_, total_, unit_) : fmt::format("{} {}", done_, unit_);
  std::string tail;
  if (final) {
    tail = fmt::format("in {}", format_duration(el));
  } else if (total_ > 0 && done_ > 0) {
    tail = fmt::format("ETA {}", format_duration(el * static_cast<double>(total_ - done_) / static_cast<double>(done_)));
  }
  std::string line = fmt::format("{} {}{} {} {} {}", label_, bar, count, format_rate(rate), what, tail);
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace nemotron
