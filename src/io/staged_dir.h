// A directory written as a whole (data prep output, convert import/export): it is filled under a
// staging name beside it, `<dir>.tmp-<host>-<pid>`, and swapped in by one rename, so a crash
// leaves the old directory or the new one, never a mix, and a rerun never sees a stale file of an
// earlier run. Staging directories of processes of this host that died are removed by the next
// writer of the same directory.
#pragma once
#include <filesystem>
#include <string>

namespace nemotron::io {

class StagedDir {
 public:
  // Removes staging leftovers of dead processes beside `target`, then creates a fresh, empty
  // staging directory (and the parent of `target` when missing).
  explicit StagedDir(std::filesystem::path target);
  ~StagedDir();  // removes the staging directory unless commit() succeeded
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;

  // Where to write the new directory's contents.
  const std::filesystem::path& path() const { return staging_; }
  // Replaces `target` (if any) with the staging directory: an atomic exchange where the file
  // system supports it, else two renames; then removes the old contents.
  void commit();

 private:
  std::filesystem::path target_, staging_;
  bool committed_ = false;
};

// Removes `<target>.tmp-<host>-<pid>` (and the `.tmp-<pid>` of earlier versions) left by
// processes of this host that are gone; returns how many. An `.old-...` left between the two
// renames of a fallback swap is put back when `target` is missing, removed otherwise.
int remove_stale_staging_dirs(const std::filesystem::path& target);

}  // namespace nemotron::io
