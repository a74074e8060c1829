#include "cli/env_toml.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <toml++/toml.h>

#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::cli {

namespace {

namespace fs = std::filesystem;

// Sections that configure the CLI itself, not a place to run (§4.4); skipped here.
const std::vector<std::string> kReserved = {"wandb", "artifacts", "cache", "cli"};
// The keys of the two executors this build runs, and `extends`. Keys of other executors (docker,
// dgxcloud, lepton, an SSH tunnel) are unknown here, so a profile using them fails loudly instead
// of running somewhere else than it says.
const std::vector<std::string> kKeys = {
    "extends",        "executor",        "nproc_per_node", "nodes",         "ntasks_per_node", "gpus_per_node",
    "cpus_per_task",  "account",         "partition",      "run_partition", "batch_partition", "time",
    "mem",            "exclusive",       "container_image", "container",    "mounts",          "startup_commands",
    "gpu_memory_gib"};

std::string type_name(const toml::node& v) {
  switch (v.type()) {
    case toml::node_type::string: return fmt::format("\"{}\"", v.as_string()->get());
    case toml::node_type::integer: return std::to_string(v.as_integer()->get());
    case toml::node_type::floating_point: return fmt::format("{}", v.as_floating_point()->get());
    case toml::node_type::boolean: return v.as_boolean()->get() ? "true" : "false";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date/time";
  }
}

struct Reader {
  std::string file, profile;
  [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
    throw InputError(fmt::format("{}: [{}] {}: {}", file, profile, key, problem));
  }
  std::string str(const std::string& key, const toml::node& v) const {
    if (!v.is_string()) fail(key, "expected a string, got " + type_name(v));
    return v.as_string()->get();
  }
  int64_t positive(const std::string& key, const toml::node& v) const {
    if (!v.is_integer() || v.as_integer()->get() < 1) fail(key, "expected a positive integer, got " + type_name(v));
    return v.as_integer()->get();
  }
  std::vector<std::string> strings(const std::string& key, const toml::node& v) const {
    if (!v.is_array()) fail(key, "expected an array of strings, got " + type_name(v));
    std::vector<std::string> out;
    for (const toml::node& e : *v.as_array()) {
      if (!e.is_string()) fail(key, "expected an array of strings, got an element " + type_name(e));
      out.push_back(e.as_string()->get());
    }
    return out;
  }
};

// Applies one profile table's keys over `p` (its base's values, or the defaults).
void apply_keys(EnvProfile& p, const toml::table& t, const Reader& r) {
  for (auto&& [k, v] : t) {
    const std::string key(k.str());
    if (key == "extends") continue;  // resolved by the caller
    if (key == "executor") {
      p.executor = r.str(key, v);
      if (p.executor != "local" && p.executor != "slurm")
        r.fail(key, fmt::format("\"{}\" is not an executor of this build (expected \"local\" or \"slurm\")", p.executor));
    } else if (key == "nproc_per_node") p.nproc_per_node = r.positive(key, v);
    else if (key == "nodes") p.nodes = r.positive(key, v);
    else if (key == "ntasks_per_node") p.ntasks_per_node = r.positive(key, v);
    else if (key == "gpus_per_node") {
      if (!v.is_integer() || v.as_integer()->get() < 0) r.fail(key, "expected an integer >= 0, got " + type_name(v));
      p.gpus_per_node = v.as_integer()->get();
    } else if (key == "cpus_per_task") p.cpus_per_task = r.positive(key, v);
    else if (key == "gpu_memory_gib") {
      const double g = v.is_integer() ? static_cast<double>(v.as_integer()->get())
                                      : v.is_floating_point() ? v.as_floating_point()->get() : -1.0;
      if (!(g > 0)) r.fail(key, "expected a positive number of GiB, got " + type_name(v));
      p.gpu_memory_gib = g;
    }
    else if (key == "account") p.account = r.str(key, v);
    else if (key == "partition") p.partition = r.str(key, v);
    else if (key == "run_partition") p.run_partition = r.str(key, v);
    else if (key == "batch_partition") p.batch_partition = r.str(key, v);
    else if (key == "time") {
      p.time = r.str(key, v);
      // Slurm's forms: MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]; digits, ':' and one '-'.
      if (p.time.empty() || p.time.find_first_not_of("0123456789:-") != std::string::npos)
        r.fail(key, fmt::format("expected a Slurm time limit like \"04:00:00\" or \"1-00:00:00\", got \"{}\"", p.time));
    } else if (key == "mem") {
      if (v.is_integer()) p.mem = std::to_string(v.as_integer()->get());
      else p.mem = r.str(key, v);
    } else if (key == "exclusive") {
      if (!v.is_boolean()) r.fail(key, "expected true or false, got " + type_name(v));
      p.exclusive = v.as_boolean()->get();
    } else if (key == "container_image" || key == "container") p.container_image = r.str(key, v);
    else if (key == "mounts") p.mounts = r.strings(key, v);
    else if (key == "startup_commands") p.startup_commands = r.strings(key, v);
    else {
      const std::string near = nearest_key(key, kKeys);
      r.fail(key, "unknown key" + (near.empty() ? fmt::format(" (keys: {})", fmt::join(kKeys, ", "))
                                                 : fmt::format(" (did you mean {}?)", near)));
    }
  }
}

EnvProfile resolve(const toml::table& doc, const std::string& file, const std::string& name,
                   std::vector<std::string>& chain) {
  chain.push_back(name);
  const toml::node* node = doc.get(name);
  const toml::table& t = *node->as_table();
  EnvProfile p;
  const Reader r{file, name};
  if (const toml::node* ext = t.get("extends")) {
    const std::string base = r.str("extends", *ext);
    if (std::find(chain.begin(), chain.end(), base) != chain.end())
      r.fail("extends", fmt::format("\"{}\" makes a cycle ({} -> {})", base, fmt::join(chain, " -> "), base));
    const toml::node* b = doc.get(base);
    if (!b || !b->is_table() || std::find(kReserved.begin(), kReserved.end(), base) != kReserved.end())
      r.fail("extends", fmt::format("no profile \"{}\" in this file", base));
    p = resolve(doc, file, base, chain);
  }
  apply_keys(p, t, r);
  p.file = file;
  p.name = name;
  return p;
}

}  // namespace

std::string find_env_file(const std::string& start_dir) {
  std::error_code ec;
  fs::path dir = fs::absolute(start_dir, ec);
  while (!dir.empty()) {
    if (fs::is_regular_file(dir / "env.toml", ec)) return (dir / "env.toml").string();
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return "";
}

EnvProfile parse_env_profile(const std::string& text, const std::string& file, const std::string& profile) {
  toml::table doc;
  try {
    doc = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    throw InputError(fmt::format("{}:{}:{}: {}", file, e.source().begin.line, e.source().begin.column,
                                 e.description()));
  }
  std::vector<std::string> profiles;
  for (auto&& [k, v] : doc) {
    const std::string name(k.str());
    if (v.is_table() && std::find(kReserved.begin(), kReserved.end(), name) == kReserved.end())
      profiles.push_back(name);
    else if (!v.is_table())  // a top-level key is neither a profile nor a reserved section
      throw InputError(fmt::format("{}: {}: a top-level key; profiles are [sections] (e.g. [{}] executor = \"local\")",
                                   file, name, profile));
  }
  if (std::find(kReserved.begin(), kReserved.end(), profile) != kReserved.end())
    throw InputError(fmt::format("{}: [{}] is a reserved section, not an execution profile", file, profile));
  if (std::find(profiles.begin(), profiles.end(), profile) == profiles.end())
    throw InputError(fmt::format("{}: no profile [{}] (profiles: {})", file, profile,
                                 profiles.empty() ? "none" : fmt::format("{}", fmt::join(profiles, ", "))));
  std::vector<std::string> chain;
  EnvProfile p = resolve(doc, file, profile, chain);
  // Checked on the whole chain: a base may leave the image to the profiles that extend it.
  if (!p.mounts.empty() && p.container_image.empty())
    throw InputError(fmt::format("{}: [{}] mounts: bind mounts are for a container (Pyxis: srun --container-mounts); "
                                 "set container_image too", file, profile));
  return p;
}

EnvProfile load_env_profile(const std::string& file, const std::string& profile) {
  std::ifstream in(file);
  if (!in) throw InputError(fmt::format("{}: cannot read the env file", file));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_env_profile(ss.str(), file, profile);
}

}  // namespace nemotron::cli
