// flock(2) with the holder line written into the locked file, and the remove-on-release protocol
// (lock, then check the path still names the locked inode) that keeps lock files from piling up.
#include "io/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/error.h"

namespace nemotron::io {

namespace {

// The holder line a live holder wrote (may be empty for an instant after it took the lock).
std::string holder_of(int fd) {
  std::string text(4096, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "its details are not written yet" : text;
}

bool locks_unsupported(int err) { return err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL; }

}  // namespace

std::string lock_holder_line(const std::string& command) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return fmt::format("pid {} on host {}, started {}: {}", ::getpid(), host, when, command);
}

FileLock FileLock::acquire(const std::string& path, const std::string& holder, bool remove_on_release, Result* result) {
  FileLock lock;
  *result = {};
  // With remove_on_release a releasing holder may delete the file between our open and flock:
  // the lock we then get is on a dead inode, so try again on the new file.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      result->outcome = Outcome::kCannotOpen;
      result->error = {errno, std::generic_category()};
      return lock;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == EWOULDBLOCK) {
        result->outcome = Outcome::kInUse;
        result->detail = holder_of(fd);
      } else if (locks_unsupported(err)) {
        result->outcome = Outcome::kUnsupported;
        result->detail = std::strerror(err);
      } else {
        ::close(fd);
        throw Error(fmt::format("{}: cannot lock: {}", path, std::strerror(err)));
      }
      ::close(fd);
      return lock;
    }
    struct stat held {}, now {};
    if (remove_on_release && (::fstat(fd, &held) != 0 || ::stat(path.c_str(), &now) != 0 || held.st_ino != now.st_ino ||
                              held.st_dev != now.st_dev)) {
      ::close(fd);
      continue;
    }
    lock.fd_ = fd, lock.path_ = path, lock.remove_ = remove_on_release;
    const std::string line = holder + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()))
      throw Error(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    return lock;
  }
  throw Error(fmt::format("{}: the lock file kept being replaced while locking it", path));
}

std::optional<std::string> FileLock::holder(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> out;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) out = holder_of(fd);
  ::close(fd);  // closing drops the probe's shared lock
  return out;
}

void FileLock::release() {
  if (fd_ < 0) return;
  if (remove_) ::unlink(path_.c_str());  // while still locked: whoever opens it next makes a new one
  ::close(fd_);
  fd_ = -1;
}

FileLock::~FileLock() { release(); }

FileLock::FileLock(FileLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)), remove_(o.remove_) { o.fd_ = -1; }

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_, path_ = std::move(o.path_), remove_ = o.remove_;
    o.fd_ = -1;
  }
  return *this;
}

}  // namespace nemotron::io
