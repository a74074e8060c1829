#include "train/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "io/checkpoint_layout.h"
#include "train/checkpoint.h"

namespace nemotron::train {

namespace fs = std::filesystem;

namespace {

std::error_code errno_code() { return {errno, std::generic_category()}; }

// The holder line a live run wrote into its lock file (may be empty for an instant after it
// took the lock).
std::string holder_of(int fd) {
  std::string text(4096, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "its details are not written yet" : text;
}

[[noreturn]] void throw_in_use(const std::string& dir, int fd) {
  const std::string holder = holder_of(fd);
  ::close(fd);
  throw InputError(fmt::format(
      "checkpoint.save {} is in use by another run ({}; lock {}/{}): wait for it to end, or pick another "
      "checkpoint.save",
      dir, holder, dir, kRunLockFile));
}

// A file system that cannot lock (some network mounts): the run goes on, unprotected, and says so.
bool locks_unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL; }

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// True when `load` names `save` itself or an iter_* directory directly inside it.
bool load_is_inside(const std::string& load, const std::string& save) {
  if (same_path(load, save)) return true;
  fs::path p(load);
  if (!p.has_filename()) p = p.parent_path();
  return io::iteration_of_dir_name(p.string()) >= 0 && same_path(p.parent_path().string(), save);
}

}  // namespace

bool same_path(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec1, ec2;
  const fs::path pa = fs::weakly_canonical(a, ec1), pb = fs::weakly_canonical(b, ec2);
  return !ec1 && !ec2 && pa == pb;
}

std::string write_failure_reason(const std::string& path, const std::error_code& ec) {
  if (ec != std::errc::permission_denied && ec != std::errc::operation_not_permitted &&
      ec != std::errc::read_only_file_system)
    return ec.message();
  std::error_code e;
  fs::path p = fs::absolute(path, e);
  while (p.has_relative_path() && !fs::exists(p, e)) p = p.parent_path();
  return fmt::format("{} is not writable", p.string());
}

RunDirState inspect_run_dir(const std::string& dir) {
  RunDirState st;
  std::error_code ec;
  st.exists = fs::is_directory(dir, ec);
  if (!st.exists) return st;
  st.tracked_iteration = io::read_tracker(dir);
  int64_t& newest = st.newest_iteration;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t it = io::iteration_of_dir_name(e.path().string());
    if (it > newest && e.is_directory(ec)) newest = it;
  }
  const fs::path metrics = fs::path(dir) / "metrics.jsonl";
  const bool has_metrics = fs::is_regular_file(metrics, ec) && fs::file_size(metrics, ec) > 0;
  if (st.tracked_iteration >= 0)
    st.held_run = fmt::format("iteration {}", st.tracked_iteration);
  else if (newest >= 0)
    st.held_run = fmt::format("{} (without {})", io::iteration_dir_name(newest), io::kTrackerFile);
  else if (has_metrics)
    st.held_run = "the metrics.jsonl";
  return st;
}

RunDirState check_run_dir(const CheckpointSection& k) {
  if (k.save.empty()) return {};
  const std::string lock = (fs::path(k.save) / kRunLockFile).string();
  if (int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {  // a read-only probe of rule 2
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) throw_in_use(k.save, fd);
    ::close(fd);  // closing drops the probe's shared lock
  }
  RunDirState st = inspect_run_dir(k.save);
  if (st.held_run.empty()) return st;
  const bool inside = !k.load.empty() && load_is_inside(k.load, k.save);
  if (inside && !k.finetune) {  // resuming the run it holds
    if (st.tracked_iteration < 0 && st.newest_iteration >= 0 && same_path(k.load, k.save))
      throw InputError(fmt::format(
          "checkpoint.save {} holds {}, so checkpoint.load={} would start from scratch over it: resume from it with "
          "checkpoint.load={}/{}, or pick another checkpoint.save",
          k.save, st.held_run, k.load, k.save, io::iteration_dir_name(st.newest_iteration)));
    return st;
  }
  if (inside)
    throw InputError(fmt::format(
        "checkpoint.save {} holds {} of an earlier run, and checkpoint.finetune=true would start over at iteration 0 "
        "there, replacing it: pick another checkpoint.save for the fine-tuned run",
        k.save, st.held_run));
  throw InputError(
      fmt::format("checkpoint.save {} holds {} of an earlier run; resume it with checkpoint.load={}, or pick another "
                  "checkpoint.save",
                  k.save, st.held_run, k.save));
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);
}

RunDirLock::RunDirLock(RunDirLock&& o) noexcept : fd_(o.fd_), notes_(std::move(o.notes_)) { o.fd_ = -1; }

RunDirLock& RunDirLock::operator=(RunDirLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_, notes_ = std::move(o.notes_);
    o.fd_ = -1;
  }
  return *this;
}

RunDirLock lock_run_dir(const CheckpointSection& k, const RunDirState& seen, const std::string& command) {
  RunDirLock lock;
  if (k.save.empty()) return lock;
  std::error_code ec;
  fs::create_directories(k.save, ec);
  if (ec) throw InputError(fmt::format("checkpoint.save {}: cannot create it: {}", k.save, write_failure_reason(k.save, ec)));
  const std::string path = (fs::path(k.save) / kRunLockFile).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(fmt::format("checkpoint.save {}: cannot create {}: {}", k.save, kRunLockFile,
                                           write_failure_reason(path, errno_code())));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) throw_in_use(k.save, fd);
    ::close(fd);
    if (!locks_unsupported(err)) throw Error(fmt::format("{}: cannot lock: {}", path, std::strerror(err)));
    lock.notes_.push_back(fmt::format("warning: {}: this file system cannot lock files ({}); nothing keeps a second run "
                                      "from writing {} at the same time",
                                      path, std::strerror(err), k.save));
  } else {
    lock.fd_ = fd;
    const std::string holder =
        fmt::format("pid {} on host {}, started {}: {}\n", ::getpid(), host_name(), utc_now(), command);
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, holder.data(), holder.size(), 0) != static_cast<ssize_t>(holder.size()))
      throw Error(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  }
  const RunDirState now = inspect_run_dir(k.save);
  if (now.tracked_iteration != seen.tracked_iteration || now.held_run.empty() != seen.held_run.empty())
    throw InputError(fmt::format(
        "checkpoint.save {} changed while this run was starting (another run wrote to it): start this run again",
        k.save));
  for (const std::string& line : finish_interrupted_writes(k.save)) lock.notes_.push_back("note: " + k.save + ": " + line);
  return lock;
}

}  // namespace nemotron::train
