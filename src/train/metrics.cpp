#include "train/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/json_limits.h"
#include "io/mapped_file.h"
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

int64_t drop_records_after(const std::string& path, const std::string& key, int64_t iteration) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return 0;
  std::string kept, line;
  int64_t dropped = 0;
  while (std::getline(in, line)) {
    const bool last = in.peek() == std::char_traits<char>::eof();
    const nlohmann::json record = parse_json_or_discarded<nlohmann::json>(line);
    const bool torn = record.is_discarded() && last;  // a kill mid-write: the line never ended
    const bool past = record.is_object() && record.contains(key) && record[key].is_number_integer() &&
                      record[key].get<int64_t>() > iteration;
    if (torn || past) {
      ++dropped;
      continue;
    }
    kept += line;
    kept += '\n';
  }
  if (dropped > 0) io::write_file_atomically(path, kept.data(), kept.size());
  return dropped;
}

io::Scalars tensorboard_scalars(const nlohmann::json& record) {
  io::Scalars out;
  const std::string type = record.value("type", "");
  if (type == "summary" || !record.is_object()) return out;
  const bool validation = type == "validation";
  static constexpr std::pair<const char*, const char*> kMegatronTags[] = {
      {"lm_loss", "lm loss"},
      {"mtp_1_loss", "mtp_1 loss"},
      {"mtp_2_loss", "mtp_2 loss"},
      {"lr", "learning-rate"},
      {"grad_norm", "grad-norm"},
      {"step_seconds", "iteration-time"},
      {"tokens_per_second", "tokens-per-second"},
  };
  for (const auto& [key, value] : record.items()) {
    if (key == "iteration" || key == "type" || !value.is_number()) continue;
    std::string tag = key;
    for (const auto& [k, t] : kMegatronTags)
      if (key == k) tag = t;
    if (validation) tag += " validation";
    out.emplace_back(tag, value.get<double>());
    // Megatron's validation perplexity, capped as it caps it (exp of at most 20).
    if (validation && key == "lm_loss") out.emplace_back(tag + " ppl", std::exp(std::min(20.0, value.get<double>())));
  }
  return out;
}

std::string format_hms(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-:--:--";
  const auto s = static_cast<int64_t>(seconds);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

}  // namespace nemotron::train
