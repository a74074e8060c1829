#include "data/prep_output.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <fstream>

#include "core/error.h"
#include "core/json_limits.h"
#include "io/mapped_file.h"
#include "io/staged_dir.h"

namespace nemotron::data {

namespace fs = std::filesystem;

namespace {

uint64_t fnv1a(uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

fs::path prep_output_dir(const std::string& output_dir, int64_t sample) {
  fs::path out = sample > 0 ? fs::path(output_dir) / fmt::format("sample-{}", sample) : fs::path(output_dir);
  return fs::absolute(out).lexically_normal();
}

std::string prep_fingerprint(const std::string& resolved_config, int64_t sample, const std::vector<std::string>& required,
                             const std::vector<std::string>& optional) {
  uint64_t h = fnv1a(1469598103934665603ull, resolved_config + fmt::format("|sample={}", sample));
  auto add = [&](const std::string& f, bool must) {
    struct stat st {};
    if (::stat(f.c_str(), &st) != 0) {
      if (must) throw InputError(fmt::format("{}: cannot stat", f));
      return;
    }
    h = fnv1a(h, fmt::format("|{}:{}:{}", f, st.st_size, st.st_mtime));
  };
  for (const std::string& f : required) add(f, true);
  for (const std::string& f : optional)
    if (!f.empty()) add(f, false);
  return fmt::format("{:016x}", h);
}

namespace {

bool is_sample_name(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.starts_with("sample-") && name.size() > 7 && name.find_first_not_of("0123456789", 7) == std::string::npos;
}

}  // namespace

bool is_sample_dir(const fs::path& p) { return is_sample_name(p) && fs::is_directory(p); }

io::FileLock lock_prep_output(const fs::path& out, const std::string& stage, std::FILE* log) {
  const fs::path dir = is_sample_name(out) ? out.parent_path() : out;
  const std::string path = dir.string() + ".lock";
  std::error_code ec;
  fs::create_directories(dir.parent_path(), ec);  // the lock lives beside the output directory
  io::FileLock::Result r;
  io::FileLock lock = io::FileLock::acquire(path, io::lock_holder_line(stage), true, &r);
  switch (r.outcome) {
    case io::FileLock::Outcome::kHeld: break;
    case io::FileLock::Outcome::kInUse:
      throw InputError(fmt::format("output_dir {} is in use by another data prep ({}; lock {}): wait for it to end, or "
                                   "pick another output_dir",
                                   dir.string(), r.detail, path));
    case io::FileLock::Outcome::kCannotOpen:
      throw InputError(fmt::format("output_dir {}: cannot create its lock {}: {}", dir.string(), path, r.error.message()));
    case io::FileLock::Outcome::kUnsupported:
      if (log)
        std::fprintf(log, "warning: %s: this file system cannot lock files (%s); nothing keeps another data prep from "
                          "writing %s at the same time\n", path.c_str(), r.detail.c_str(), dir.c_str());
  }
  return lock;
}

std::optional<nlohmann::json> up_to_date_output(const fs::path& out, const std::string& fingerprint,
                                                const fs::path& must_exist, bool force) {
  io::remove_stale_staging_dirs(out);  // of a killed earlier run, even when this one has nothing to do
  if (!fs::exists(out)) return std::nullopt;
  const fs::path meta_path = out / "metadata.json";
  if (!force && fs::exists(meta_path) && fs::exists(must_exist)) {
    try {
      std::ifstream in(meta_path);
      nlohmann::json meta = parse_json_or_discarded<nlohmann::json>(in);
      if (meta.is_object() && meta.value("fingerprint", "") == fingerprint) return meta;
    } catch (const nlohmann::json::exception&) {
      // unreadable metadata: not up to date; the directory is replaced only with --force
    }
  }
  bool only_samples = true;  // --sample outputs alone do not make it "another output"
  for (const auto& e : fs::directory_iterator(out)) only_samples = only_samples && is_sample_dir(e.path());
  if (!force && !only_samples)
    throw InputError(fmt::format("{}: exists and was made from another configuration or inputs; pass --force to "
                                 "overwrite it",
                                 out.string()));
  return std::nullopt;
}

void commit_prep_output(io::StagedDir& staged, const fs::path& out, const nlohmann::json& metadata) {
  const std::string text = metadata.dump(2) + "\n";
  io::write_file_atomically((staged.path() / "metadata.json").string(), text.data(), text.size());
  if (fs::exists(out))
    for (const auto& e : fs::directory_iterator(out))
      if (is_sample_dir(e.path()) && !fs::exists(staged.path() / e.path().filename()))
        fs::rename(e.path(), staged.path() / e.path().filename());
  staged.commit();  // swap the finished directory into place
}

}  // namespace nemotron::data
