#include "train/metrics.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "train/run_dir.h"

namespace nemotron::train {

MetricsFile::MetricsFile(const std::string& path, bool append) : path_(path) {
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec)
    throw InputError(fmt::format("{}: cannot create the metrics file's directory: {}", path,
                                 write_failure_reason(parent.string(), ec)));
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f_) {
    const std::error_code err(errno, std::generic_category());
    const std::string why = write_failure_reason(path, err);
    if (why != err.message()) throw InputError(fmt::format("{}: cannot open the metrics file: {}", path, why));
    throw Error(fmt::format("{}: cannot open the metrics file: {}", path, why));
  }
}

MetricsFile::~MetricsFile() {
  if (f_) std::fclose(f_);
}

MetricsFile& MetricsFile::operator=(MetricsFile&& o) noexcept {
  if (this != &o) {
    if (f_) std::fclose(f_);
    f_ = o.f_, path_ = std::move(o.path_);
    o.f_ = nullptr;
  }
  return *this;
}

void MetricsFile::write(const nlohmann::json& record) {
  if (!f_) return;
  const std::string line = record.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), f_) != line.size() || std::fflush(f_) != 0)
    throw Error(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
}

std::string format_hms(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-:--:--";
  const auto s = static_cast<int64_t>(seconds);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

}  // namespace nemotron::train
