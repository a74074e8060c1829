// What a training run reports: the JSONL metrics file (one object per line, flushed as it is
// written, so a crash loses nothing already logged), the TensorBoard scalars Megatron logs for
// the same records, and the time formats of the log lines.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "io/tensorboard_writer.h"

namespace nemotron::train {

class MetricsFile {
 public:
  MetricsFile() = default;
  // Creates the parent directory; `append` keeps earlier lines (a resumed run continues the file).
  MetricsFile(const std::string& path, bool append);
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  MetricsFile(MetricsFile&& o) noexcept : f_(o.f_), path_(std::move(o.path_)) { o.f_ = nullptr; }
  MetricsFile& operator=(MetricsFile&& o) noexcept;
  bool is_open() const { return f_ != nullptr; }
  const std::string& path() const { return path_; }
  void write(const nlohmann::json& record);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

// Before a resumed run appends to `path`: removes the records numbered past `iteration` (their
// `key`, "iteration" or "step", above it), which a run killed after its last checkpoint logged and
// the resumed run logs again, and a torn last line (a kill mid-write). Other lines are kept as
// they are. The file is rewritten atomically, and only when something goes; returns how many
// lines went (0 also when there is no file).
int64_t drop_records_after(const std::string& path, const std::string& key, int64_t iteration);

// The TensorBoard scalars of one metrics.jsonl record, under Megatron's tags: a "train" record's
// lm_loss, lr, grad_norm, step_seconds become "lm loss", "learning-rate", "grad-norm",
// "iteration-time"; a "validation" record's lm_loss becomes "lm loss validation" and "lm loss
// validation ppl". Any other number keeps its key (a "validation" record's gets " validation"
// appended), so stages with their own metrics (RL rewards) need no table here. "summary" records,
// the iteration itself, and non-numbers are left out.
io::Scalars tensorboard_scalars(const nlohmann::json& record);

// 3725.4 -> "1:02:05"; 59.9 -> "0:00:59".
std::string format_hms(double seconds);

}  // namespace nemotron::train
