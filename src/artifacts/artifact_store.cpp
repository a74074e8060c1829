#include "artifacts/artifact_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "core/config_tree.h"
#include "core/error.h"
#include "io/mapped_file.h"

namespace nemotron::artifacts {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const fs::path& p, const std::string& text) { io::write_file_atomically(p.string(), text.data(), text.size()); }

int64_t parse_version(const std::string& v) {
  if (v.size() < 2 || v[0] != 'v' || v.find_first_not_of("0123456789", 1) != std::string::npos || v.size() > 12)
    return 0;
  return std::stoll(v.substr(1));
}

// Holds <root>/.lock exclusively while alive.
class StoreLock {
 public:
  explicit StoreLock(const fs::path& root) {
    fs::create_directories(root);
    const std::string p = (root / ".lock").string();
    fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(fmt::format("{}: cannot open the artifact store's lock", p));
    if (::flock(fd_, LOCK_EX) != 0 && errno != ENOLCK && errno != EOPNOTSUPP) {
      ::close(fd_);
      throw Error(fmt::format("{}: cannot lock", p));
    }
  }
  ~StoreLock() { ::close(fd_); }
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

 private:
  int fd_ = -1;
};

nlohmann::json read_aliases(const fs::path& dir) {
  const fs::path p = dir / "aliases.json";
  if (!fs::exists(p)) return nlohmann::json::object();
  nlohmann::json j = parse_json_text(read_text(p), p.string());
  if (!j.is_object()) throw InputError(fmt::format("{}: not a mapping", p.string()));
  return j;
}

}  // namespace

ArtifactStore::ArtifactStore(fs::path root) : root_(fs::absolute(std::move(root)).lexically_normal()) {}

std::vector<std::string> ArtifactStore::names() const {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return out;
  for (const auto& e : fs::directory_iterator(root_))
    if (e.is_directory() && valid_artifact_name(e.path().filename().string()) && fs::exists(e.path() / "latest"))
      out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Artifact> ArtifactStore::versions(const std::string& name) const {
  std::vector<std::pair<int64_t, Artifact>> found;
  std::error_code ec;
  const fs::path dir = root_ / name;
  if (!valid_artifact_name(name) || !fs::is_directory(dir, ec)) return {};
  for (const auto& e : fs::directory_iterator(dir)) {
    const int64_t v = parse_version(e.path().filename().string());
    if (v <= 0 || !fs::exists(e.path() / "manifest.json")) continue;
    const fs::path m = e.path() / "manifest.json";
    found.emplace_back(v, Artifact::from_json(parse_json_text(read_text(m), m.string()), m.string()));
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Artifact> out;
  for (auto& [v, a] : found) out.push_back(std::move(a));
  return out;
}

std::optional<Artifact> ArtifactStore::find(const ArtifactRef& ref) const {
  const fs::path dir = root_ / ref.name;
  std::error_code ec;
  if (!valid_artifact_name(ref.name) || !fs::is_directory(dir, ec)) return std::nullopt;
  std::string v = ref.version;
  if (v == "latest") {
    v = read_text(dir / "latest");
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  } else if (parse_version(v) <= 0) {
    const nlohmann::json aliases = read_aliases(dir);
    if (!aliases.contains(v) || !aliases[v].is_string()) return std::nullopt;
    v = aliases[v].get<std::string>();
  }
  if (parse_version(v) <= 0) return std::nullopt;
  const fs::path m = dir / v / "manifest.json";
  if (!fs::exists(m)) return std::nullopt;
  return Artifact::from_json(parse_json_text(read_text(m), m.string()), m.string());
}

std::map<std::string, Artifact> ArtifactStore::latest_by_path(const std::string& type) const {
  std::map<std::string, Artifact> out;
  for (const std::string& n : names()) {  // sorted: of two created at the same time, the first name
    std::optional<Artifact> a = find({n, "latest"});
    if (!a || (!type.empty() && a->type != type)) continue;
    const std::string at = fs::path(a->path).lexically_normal().string();
    auto it = out.find(at);
    if (it == out.end()) out.emplace(at, std::move(*a));
    else if (a->created_at > it->second.created_at) it->second = std::move(*a);
  }
  return out;
}

std::optional<Artifact> ArtifactStore::latest_at_path(const std::string& path, const std::string& type) const {
  std::map<std::string, Artifact> at = latest_by_path(type);
  auto it = at.find(fs::absolute(path).lexically_normal().string());
  if (it == at.end()) return std::nullopt;
  return std::move(it->second);
}

Artifact ArtifactStore::get(const ArtifactRef& ref) const {
  if (auto a = find(ref)) return *a;
  std::string have;
  for (const std::string& n : names()) have += (have.empty() ? "" : ", ") + n;
  const std::vector<Artifact> vs = versions(ref.name);
  if (!vs.empty()) {
    have = ref.name + " has";
    for (const Artifact& a : vs) have += " v" + std::to_string(a.version);
  }
  throw InputError(fmt::format("artifact {} not found in {} ({})", ref.str(), root_.string(),
                               have.empty() ? "the store is empty" : "have: " + have));
}

Artifact ArtifactStore::publish(Artifact a) {
  if (!valid_artifact_name(a.name)) throw InputError(fmt::format("\"{}\" is not a valid artifact name", a.name));
  for (const std::string& in : a.inputs) get(ArtifactRef::parse(in, "artifact " + a.name + " input"));
  if (a.created_at.empty()) a.created_at = now_iso8601();
  std::sort(a.inputs.begin(), a.inputs.end());
  a.inputs.erase(std::unique(a.inputs.begin(), a.inputs.end()), a.inputs.end());

  StoreLock lock(root_);
  const fs::path dir = root_ / a.name;
  fs::create_directories(dir);
  nlohmann::json aliases = read_aliases(dir);
  auto add_aliases = [&](const Artifact& to) {
    bool changed = false;
    for (const std::string& al : a.aliases) {
      if (!valid_artifact_name(al) || al == "latest" || parse_version(al) > 0)
        throw InputError(fmt::format("artifact {}: \"{}\" cannot be an alias", a.name, al));
      if (aliases.value(al, "") != version_label(to.version)) aliases[al] = version_label(to.version), changed = true;
    }
    if (changed) write_text(dir / "aliases.json", aliases.dump(2) + "\n");
  };
  if (auto latest = find({a.name, "latest"})) {
    if (latest->type == a.type && latest->path == a.path && latest->content_hash == a.content_hash &&
        latest->inputs == a.inputs) {
      add_aliases(*latest);
      for (const std::string& al : a.aliases)
        if (std::find(latest->aliases.begin(), latest->aliases.end(), al) == latest->aliases.end())
          latest->aliases.push_back(al);
      return *latest;
    }
  }
  int64_t next = 1;
  for (const auto& e : fs::directory_iterator(dir)) next = std::max(next, parse_version(e.path().filename().string()) + 1);
  a.version = next;
  const fs::path vdir = dir / version_label(next);
  const fs::path staging = dir / (".v" + std::to_string(next) + ".tmp-" + std::to_string(::getpid()));
  fs::remove_all(staging);
  fs::create_directories(staging);
  const std::string manifest = a.to_json().dump(2) + "\n";
  write_text(staging / "manifest.json", manifest);
  // metadata.json as §5.1 (the record a W&B user knows), beside the manifest.
  nlohmann::json meta = {{"path", a.path},         {"type", a.type},          {"metadata", a.metadata},
                         {"created_at", a.created_at}, {"producer", a.producer}, {"name", a.name},
                         {"tracking", {{"artifact_id", a.ref()}, {"artifact_type", a.type}, {"run_id", nullptr},
                                       {"url", nullptr}, {"used_artifacts", a.inputs}}}};
  write_text(staging / "metadata.json", meta.dump(2) + "\n");
  fs::rename(staging, vdir);
  add_aliases(a);
  write_text(dir / "latest", version_label(next) + "\n");
  return a;
}

std::vector<LineageEntry> lineage(const ArtifactStore& store, const ArtifactRef& ref) {
  std::vector<LineageEntry> out;
  std::set<std::string> seen;
  auto walk = [&](auto&& self, const Artifact& a, int depth) -> void {
    out.push_back({a, depth});
    if (!seen.insert(a.ref()).second) return;  // printed again, its inputs once
    for (const std::string& in : a.inputs) self(self, store.get(ArtifactRef::parse(in, a.ref() + " inputs")), depth + 1);
  };
  walk(walk, store.get(ref), 0);
  return out;
}

}  // namespace nemotron::artifacts
