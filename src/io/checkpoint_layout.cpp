#include "io/checkpoint_layout.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace nemotron::io {

std::string iteration_dir_name(int64_t iteration) { return fmt::format("iter_{:07d}", iteration); }

int64_t read_tracker(const std::string& save_dir) {
  const std::filesystem::path tracker = std::filesystem::path(save_dir) / kTrackerFile;
  std::error_code ec;
  if (!std::filesystem::exists(tracker, ec)) return -1;
  std::ifstream f(tracker, std::ios::binary);
  if (!f) throw InputError(fmt::format("{}: cannot open: {}", tracker.string(), std::strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  text.erase(std::remove_if(text.begin(), text.end(), [](unsigned char c) { return std::isspace(c); }), text.end());
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 0)
    throw InputError(fmt::format("{}: expected an iteration number, got \"{}\"", tracker.string(), text));
  return v;
}

}  // namespace nemotron::io
