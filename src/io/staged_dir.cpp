#include "io/staged_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace nemotron::io {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "host";
  std::string h(buf);
  for (char& c : h)  // a name component: keep it to [A-Za-z0-9_.-]
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return h;
}

bool process_is_gone(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

// For `<name>.tmp-<host>-<pid>`, `<name>.old-<host>-<pid>` of this host, or `<name>.tmp-<pid>` of
// earlier versions: the kind ("tmp" or "old") and the pid; nullopt for any other name.
std::optional<std::pair<std::string, long>> parse_staging_name(const std::string& f, const std::string& name) {
  for (const char* kind : {"tmp", "old"}) {
    const std::string prefix = name + "." + kind + "-";
    if (f.size() <= prefix.size() || f.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = f.substr(prefix.size());
    const std::string host = host_name() + "-";
    if (rest.compare(0, host.size(), host) == 0 && rest.size() > host.size()) rest = rest.substr(host.size());
    if (rest.size() > 9 || rest.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::make_pair(std::string(kind), std::stol(rest));
  }
  return std::nullopt;
}

}  // namespace

int remove_stale_staging_dirs(const fs::path& target) {
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string name = target.filename().string();
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) return 0;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string f = entry.path().filename().string();
    const auto staging = parse_staging_name(f, name);  // another host's pid says nothing here
    if (!staging || !process_is_gone(staging->second)) continue;
    if (staging->first == "old" && !fs::exists(target, ec)) {
      fs::rename(entry.path(), target, ec);  // the swap died between its two renames: undo it
      continue;
    }
    fs::remove_all(entry.path(), ec);
    if (ec)
      throw Error(
          fmt::format("{}: cannot remove a stale staging directory: {}", entry.path().string(), ec.message()));
    ++removed;
  }
  return removed;
}

StagedDir::StagedDir(fs::path target) : target_(std::move(target)) {
  remove_stale_staging_dirs(target_);
  staging_ = fs::path(target_.string() + fmt::format(".tmp-{}-{}", host_name(), ::getpid()));
  std::error_code ec;
  fs::remove_all(staging_, ec);
  fs::create_directories(staging_, ec);
  if (ec) throw Error(fmt::format("{}: cannot create the directory: {}", staging_.string(), ec.message()));
}

StagedDir::~StagedDir() {
  std::error_code ec;
  if (!committed_) fs::remove_all(staging_, ec);
}

void StagedDir::commit() {
  std::error_code ec;
  if (!fs::exists(target_, ec)) {
    fs::rename(staging_, target_, ec);
    if (ec) throw Error(fmt::format("{}: cannot rename to {}: {}", staging_.string(), target_.string(), ec.message()));
    committed_ = true;
    return;
  }
  if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
    committed_ = true;  // the staging name now holds the old contents
    fs::remove_all(staging_, ec);
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != EXDEV)
    throw Error(fmt::format("{}: cannot swap in {}: {}", target_.string(), staging_.string(), std::strerror(errno)));
  // No atomic exchange on this file system: two renames (remove_stale_staging_dirs undoes a half).
  const fs::path old(target_.string() + fmt::format(".old-{}-{}", host_name(), ::getpid()));
  fs::rename(target_, old, ec);
  if (ec) throw Error(fmt::format("{}: cannot rename to {}: {}", target_.string(), old.string(), ec.message()));
  fs::rename(staging_, target_, ec);
  if (ec) {
    std::error_code back;
    fs::rename(old, target_, back);
    throw Error(fmt::format("{}: cannot rename to {}: {}", staging_.string(), target_.string(), ec.message()));
  }
  committed_ = true;
  fs::remove_all(old, ec);
}

}  // namespace nemotron::io
