#include "train/run_dir.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "io/checkpoint_layout.h"
#include "io/file_lock.h"
#include "train/checkpoint.h"

namespace nemotron::train {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void throw_in_use(const std::string& dir, const std::string& holder, const std::string& key) {
  throw InputError(fmt::format("{} {} is in use by another run ({}; lock {}/{}): wait for it to end, or pick another {}",
                               key, dir, holder, dir, kRunLockFile, key));
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

RunDirState check_run_dir(const CheckpointSection& k, const std::string& save_key) {
  if (k.save.empty()) return {};
  // A read-only probe of rule 2.
  if (auto holder = io::FileLock::holder((fs::path(k.save) / kRunLockFile).string())) throw_in_use(k.save, *holder, save_key);
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

RunDirLock lock_run_dir(const CheckpointSection& k, const RunDirState& seen, const std::string& command,
                        const std::string& save_key) {
  RunDirLock lock;
  if (k.save.empty()) return lock;
  std::error_code ec;
  fs::create_directories(k.save, ec);
  if (ec) throw InputError(fmt::format("{} {}: cannot create it: {}", save_key, k.save, write_failure_reason(k.save, ec)));
  const std::string path = (fs::path(k.save) / kRunLockFile).string();
  io::FileLock::Result r;
  lock.lock_ = io::FileLock::acquire(path, io::lock_holder_line(command), false, &r);
  switch (r.outcome) {
    case io::FileLock::Outcome::kHeld: break;
    case io::FileLock::Outcome::kInUse: throw_in_use(k.save, r.detail, save_key);
    case io::FileLock::Outcome::kCannotOpen:
      throw InputError(fmt::format("{} {}: cannot create {}: {}", save_key, k.save, kRunLockFile, write_failure_reason(path, r.error)));
    case io::FileLock::Outcome::kUnsupported:
      lock.notes_.push_back(fmt::format("warning: {}: this file system cannot lock files ({}); nothing keeps a second run "
                                        "from writing {} at the same time",
                                        path, r.detail, k.save));
  }
  const RunDirState now = inspect_run_dir(k.save);
  if (now.tracked_iteration != seen.tracked_iteration || now.held_run.empty() != seen.held_run.empty())
    throw InputError(fmt::format(
        "{} {} changed while this run was starting (another run wrote to it): start this run again", save_key,
        k.save));
  for (const std::string& line : finish_interrupted_writes(k.save)) lock.notes_.push_back("note: " + k.save + ": " + line);
  return lock;
}

}  // namespace nemotron::train
