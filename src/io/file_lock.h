// An exclusive advisory lock (flock) on a file that records who holds it: training runs lock
// <checkpoint dir>/run.lock, data preps <output_dir>.lock. The kernel drops the lock when the
// holder dies, however it dies, so a stale file never blocks; a second writer learns at once who
// holds it. A lock taken with `remove_on_release` deletes its file when released, and acquiring
// checks that the locked file is still the one at `path`, so no stale file is left and a writer
// never holds a lock on a file another has just deleted.
#pragma once
#include <optional>
#include <string>
#include <system_error>

namespace nemotron::io {

class FileLock {
 public:
  enum class Outcome {
    kHeld,         // the lock is ours
    kInUse,        // another process holds it; `detail` is its holder line
    kUnsupported,  // the file system cannot lock (some network mounts); `detail` says why
    kCannotOpen,   // the file could not be created; `error` says why
  };
  struct Result {
    Outcome outcome = Outcome::kHeld;
    std::string detail;
    std::error_code error;
  };

  FileLock() = default;
  ~FileLock();
  FileLock(FileLock&& o) noexcept;
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Opens (creating) `path` and takes the lock without waiting; when held, `holder` (one line)
  // replaces the file's contents. Throws Error only when a held lock file cannot be written.
  static FileLock acquire(const std::string& path, const std::string& holder, bool remove_on_release, Result* result);
  bool held() const { return fd_ >= 0; }
  void release();
  // A read-only probe: the holder line of a live holder of `path`, nullopt when none holds it
  // (or the file is missing). Creates and writes nothing.
  static std::optional<std::string> holder(const std::string& path);

 private:
  int fd_ = -1;
  std::string path_;
  bool remove_ = false;
};

// "pid P on host H, started <UTC time>: <command>", what a holder writes.
std::string lock_holder_line(const std::string& command);

}  // namespace nemotron::io
