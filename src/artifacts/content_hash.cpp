#include "artifacts/content_hash.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace nemotron::artifacts {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kFullReadBytes = 64ull << 20, kWindows = 16;  // see content_hash.h
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull, kFnvPrime = 0x100000001b3ull;

void mix(uint64_t& h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
}

}  // namespace

std::string content_hash(const fs::path& path, const std::vector<std::string>& skip) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(fmt::format("{}: no such file or directory", path.string()));
  std::vector<std::pair<std::string, fs::path>> files;  // (relative name, path)
  if (fs::is_directory(path)) {
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::follow_directory_symlink);
         it != fs::recursive_directory_iterator(); ++it) {
      const std::string rel = fs::relative(it->path(), path).generic_string();
      const std::string first = rel.substr(0, rel.find('/'));
      if (std::find(skip.begin(), skip.end(), first) != skip.end()) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) files.emplace_back(rel, it->path());
    }
  } else {
    files.emplace_back(path.filename().string(), path);
  }
  std::sort(files.begin(), files.end());
  uint64_t h = kFnvOffset;
  std::vector<char> buf(1 << 20);
  for (const auto& [rel, p] : files) {
    mix(h, rel.data(), rel.size() + 1);  // with its terminator: "ab"+"c" differs from "a"+"bc"
    const uint64_t size = fs::file_size(p);
    mix(h, &size, sizeof size);
    std::ifstream in(p, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot read", p.string()));
    if (size > kFullReadBytes) {
      for (uint64_t w = 0; w < kWindows; ++w) {
        in.seekg(static_cast<std::streamoff>((size - buf.size()) / (kWindows - 1) * w));
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        mix(h, buf.data(), static_cast<size_t>(in.gcount()));
      }
      continue;
    }
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      mix(h, buf.data(), static_cast<size_t>(in.gcount()));
    }
  }
  return fmt::format("{:016x}", h);
}

}  // namespace nemotron::artifacts
