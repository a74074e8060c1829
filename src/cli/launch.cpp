#include "cli/launch.h"

#include <algorithm>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/distributed.h"
#include "cli/recipe_paths.h"
#include "core/config_tree.h"
#include "core/error.h"

namespace nemotron::cli {

namespace {

namespace fs = std::filesystem;

std::string join_quoted(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) {
    if (!s.empty()) s += ' ';
    s += shell_quote(w);
  }
  return s;
}

// The recipe with the command's overrides, as a tree: enough to find the run directory without
// building the whole typed config (the command validates everything when it runs).
nlohmann::json recipe_tree(const TrainingCommandOptions& o, std::string& path) {
  path = resolve_recipe(o.family, o.stage, o.config);
  nlohmann::json tree = load_config_file(path);
  apply_overrides(tree, o.overrides, path);
  return tree;
}

std::string tree_string(const nlohmann::json& tree, const std::string& section, const std::string& key) {
  if (!tree.is_object() || !tree.contains(section) || !tree[section].is_object()) return "";
  const nlohmann::json& v = tree[section].value(key, nlohmann::json());
  return v.is_string() ? v.get<std::string>() : "";
}

// The directory the run owns: checkpoint.save (pretrain, sft) or checkpointing.checkpoint_dir (rl,
// NeMo RL's key). The batch script and the job's log go there, beside the checkpoints.
std::string run_dir_key(const TrainingCommandOptions& o) {
  return o.stage == "rl" ? "checkpointing.checkpoint_dir" : "checkpoint.save";
}

// Replaces this process with `argv`; returns only by throwing.
[[noreturn]] void exec(const std::vector<std::string>& argv) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char*> c;
  for (const std::string& a : argv) c.push_back(const_cast<char*>(a.c_str()));
  c.push_back(nullptr);
  execvp(c[0], c.data());
  throw Error(fmt::format("cannot run {}: {}{}", argv[0], std::strerror(errno),
                          argv[0] == "mpirun" ? " (install Open MPI: openmpi-bin)"
                                              : " (is this a Slurm node? install slurm-wlm / check PATH)"));
}

// A local run starts nproc_per_node copies on this machine: without a thread count each would
// spin up an OpenMP thread per core and they would starve each other; share the cores instead.
void share_cores(int64_t ranks, int cores) {
  if (std::getenv("OMP_NUM_THREADS")) return;
  const std::string n = std::to_string(std::max<int64_t>(1, cores / ranks));
  setenv("OMP_NUM_THREADS", n.c_str(), 1);
}

// The profile's startup commands run once in a shell that then becomes the launcher.
std::vector<std::string> with_startup(const EnvProfile& p, const std::vector<std::string>& launcher) {
  if (p.startup_commands.empty()) return launcher;
  std::string sh;
  for (const std::string& c : p.startup_commands) sh += c + "\n";
  std::vector<std::string> a = {"/bin/bash", "-ec", sh + "exec \"$@\"", "nemotron-startup"};
  a.insert(a.end(), launcher.begin(), launcher.end());
  return a;
}

std::string timestamp() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

// Writes `text` to `path` through a temporary name and a rename, so a crash never leaves half a script.
void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.flush()) throw Error(fmt::format("{}: cannot write: {}", tmp.string(), std::strerror(errno)));
  }
  fs::permissions(tmp, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
  fs::rename(tmp, path);
}

// `sbatch --parsable SCRIPT`; returns the job id (sbatch's own errors go to standard error).
std::string submit(const fs::path& script) {
  const std::string cmd = "sbatch --parsable " + shell_quote(script.string());
  std::fflush(stdout);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) throw Error(fmt::format("cannot run sbatch: {}", std::strerror(errno)));
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  if (status != 0)
    throw Error(fmt::format("sbatch {} failed ({}); the script stays there to inspect",
                            script.string(), status == -1 || !WIFEXITED(status) ? "no exit status" :
                            fmt::format("exit {}", WEXITSTATUS(status))));
  // --parsable prints "jobid" or "jobid;cluster".
  const std::string id = out.substr(0, out.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw Error(fmt::format("sbatch {}: expected a job id, got \"{}\"", script.string(), out));
  return id;
}

// The profile `name` of --env-file or the env.toml found walking up; `option` (--run, --batch)
// names the flag in errors. Refused inside a launch: the option starts the ranks itself.
EnvProfile find_profile(const std::string& option, const std::string& name, const std::string& env_file) {
  if (!launch_info().launcher.empty())
    throw InputError(fmt::format("{}: this process is already rank {} of {} started by {}; {} starts the ranks itself "
                                 "(run it outside the launcher)",
                                 option, launch_info().rank, launch_info().size, launch_info().launcher, option));
  std::string file = env_file;
  if (file.empty()) {
    file = find_env_file(fs::current_path().string());
    if (file.empty())
      throw InputError(fmt::format("{} {}: no env.toml in {} or any directory above it (write one with a [{}] "
                                   "profile, or pass --env-file PATH)",
                                   option, name, fs::current_path().string(), name));
  }
  return load_env_profile(file, name);
}

std::string run_banner(const std::string& option, const EnvProfile& p) {
  return fmt::format("{} {}: profile [{}] of {}, executor {}, {} rank{}", option, p.name, p.name, p.file, p.executor,
                     p.world_size(), p.world_size() == 1 ? "" : "s");
}

// --run: the launcher's command line for `rank` under `p`.
std::vector<std::string> attached_argv(const EnvProfile& p, const std::vector<std::string>& rank) {
  return p.executor == "local" ? mpirun_argv(p, rank, geteuid() == 0) : srun_argv(p, rank);
}

// --run: replaces this process with the launcher running `rank` (after the banner and command).
[[noreturn]] void exec_attached(const EnvProfile& p, const std::vector<std::string>& rank, const std::string& banner) {
  // srun places the ranks in the allocation this shell holds; outside one it would make its own
  // (blocking in a queue, without the profile's partition and account): refuse instead.
  if (p.executor == "slurm" && !std::getenv("SLURM_JOB_ID"))
    throw InputError(fmt::format("{}: [{}]: --run with executor slurm runs inside an allocation, and SLURM_JOB_ID is "
                                 "not set (salloc -N {} --ntasks-per-node {} first, or submit with --batch {})",
                                 p.file, p.name, p.nodes, p.ntasks_per_node, p.name));
  std::printf("%s\n%s\n", banner.c_str(), join_quoted(attached_argv(p, rank)).c_str());
  if (p.executor == "local")
    share_cores(p.nproc_per_node, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  exec(with_startup(p, attached_argv(p, rank)));
}

}  // namespace

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,/:=+@%") ==
                           std::string::npos)
    return word;
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::vector<std::string> rank_argv(const TrainingCommandOptions& o, const std::string& exe) {
  std::vector<std::string> a = {exe, o.family, o.stage, "-c", o.config};
  a.insert(a.end(), o.overrides.begin(), o.overrides.end());
  return a;
}

std::vector<std::string> mpirun_argv(const EnvProfile& p, const std::vector<std::string>& rank, bool root) {
  std::vector<std::string> a = {"mpirun", "-np", std::to_string(p.nproc_per_node)};
  if (root) a.push_back("--allow-run-as-root");  // Open MPI refuses root without it
  // Open MPI refuses more ranks than slots, and counts a slot per physical core: a machine with 2
  // hyperthreads on 1 core has 1. The profile's nproc_per_node is the user's explicit choice.
  a.push_back("--oversubscribe");
  a.insert(a.end(), rank.begin(), rank.end());
  return a;
}

std::vector<std::string> srun_argv(const EnvProfile& p, const std::vector<std::string>& rank) {
  // --mpi=pmix: Debian's (and most) Open MPI builds find their rank through PMIx, not PMI-1/2.
  std::vector<std::string> a = {"srun", "--mpi=pmix", fmt::format("--nodes={}", p.nodes),
                                fmt::format("--ntasks-per-node={}", p.ntasks_per_node)};
  if (p.gpus_per_node > 0) a.push_back(fmt::format("--gpus-per-node={}", p.gpus_per_node));
  if (p.cpus_per_task > 0) a.push_back(fmt::format("--cpus-per-task={}", p.cpus_per_task));
  if (!p.container_image.empty()) a.push_back("--container-image=" + p.container_image);
  if (!p.mounts.empty()) a.push_back(fmt::format("--container-mounts={}", fmt::join(p.mounts, ",")));
  a.insert(a.end(), rank.begin(), rank.end());
  return a;
}

std::string sbatch_script(const EnvProfile& p, const std::vector<std::string>& rank, const std::string& run_dir,
                          const std::string& work_dir, const std::string& job_name) {
  std::string s = "#!/bin/bash\n";
  s += fmt::format("# Written by nemotron --batch {} ({}). Resubmit with: sbatch {}/<this file>\n", p.name, p.file,
                   run_dir);
  auto line = [&s](const std::string& opt) { s += "#SBATCH " + opt + "\n"; };
  line("--job-name=" + job_name);
  line(fmt::format("--nodes={}", p.nodes));
  line(fmt::format("--ntasks-per-node={}", p.ntasks_per_node));
  if (p.gpus_per_node > 0) line(fmt::format("--gpus-per-node={}", p.gpus_per_node));
  if (p.cpus_per_task > 0) line(fmt::format("--cpus-per-task={}", p.cpus_per_task));
  const std::string& partition = p.batch_partition.empty() ? p.partition : p.batch_partition;
  if (!partition.empty()) line("--partition=" + partition);
  if (!p.account.empty()) line("--account=" + p.account);
  if (!p.mem.empty()) line("--mem=" + p.mem);
  if (p.exclusive) line("--exclusive");
  line("--time=" + p.time);
  line("--chdir=" + work_dir);  // relative recipe paths and overrides mean what they meant here
  // One log beside the run; a requeued attempt appends to it instead of replacing it.
  line(fmt::format("--output={}/slurm-%j.out", run_dir));
  line("--open-mode=append");
  // A preempted or failed node requeues the job; the command resumes from the run's latest
  // checkpoint (checkpoint.load = checkpoint.save), so a requeue costs at most one save interval.
  line("--requeue");
  // SIGTERM to every rank 2 minutes before the time limit: the run saves one consistent
  // iteration at the next step and stops (cli/stop_signals.h).
  line("--signal=TERM@120");
  s += "set -euo pipefail\n";
  if (p.cpus_per_task > 0) s += fmt::format("export OMP_NUM_THREADS={}\n", p.cpus_per_task);
  for (const std::string& c : p.startup_commands) s += c + "\n";
  s += join_quoted(srun_argv(p, rank)) + "\n";
  return s;
}

void launch_training(const TrainingCommandOptions& o, const std::function<int(const TrainingCommandOptions&)>& run) {
  const bool batch = !o.batch_profile.empty();
  const std::string option = batch ? "--batch" : "--run";
  const EnvProfile p = find_profile(option, batch ? o.batch_profile : o.run_profile, o.env_file);
  if (batch && p.executor != "slurm")
    throw InputError(fmt::format("{}: [{}] executor: --batch submits to Slurm, the profile's executor is \"{}\" (use "
                                 "--run {} to run attached)",
                                 p.file, p.name, p.executor, p.name));

  std::string recipe;
  const nlohmann::json tree = recipe_tree(o, recipe);
  const std::string dir_key = run_dir_key(o);
  const std::string dir = tree_string(tree, dir_key.substr(0, dir_key.find('.')), dir_key.substr(dir_key.find('.') + 1));
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> rank = rank_argv(o, exe);

  std::string text;  // what --dry-run prints
  fs::path script;
  if (batch) {
    if (dir.empty())
      throw InputError(fmt::format("{}: {}: empty; --batch writes its script and the job's log beside the run's "
                                   "checkpoints (set {}=DIR)", recipe, dir_key, dir_key));
    // A requeued job runs the same script again: it must resume, not start over (which the run
    // directory's owner rule would refuse). pretrain and sft resume with checkpoint.load = save
    // (from scratch while it holds no checkpoint); rl resumes its checkpoint_dir by itself.
    if (o.stage != "rl" && tree_string(tree, "checkpoint", "load").empty()) rank.push_back("checkpoint.load=" + dir);
    const std::string run_dir = fs::absolute(dir).lexically_normal().string();
    text = sbatch_script(p, rank, run_dir, fs::current_path().string(), fmt::format("nemotron-{}-{}", o.family, o.stage));
    script = fs::path(run_dir) / fmt::format("sbatch_{}.sh", timestamp());
  } else {
    text = join_quoted(attached_argv(p, rank)) + "\n";
  }
  const std::string banner = run_banner(option, p);

  TrainingCommandOptions planned = o;  // the command itself, at the launch's world size
  planned.run_profile.clear();
  planned.batch_profile.clear();
  planned.planned_world_size = static_cast<int>(p.world_size());
  planned.planned_ranks_per_node = p.ranks_per_node();
  planned.planned_gpu_bytes = p.gpu_memory_gib * 1024.0 * 1024.0 * 1024.0;
  planned.dry_run = true;
  if (o.dry_run) {
    std::printf("%s\n%s", banner.c_str(), batch ? fmt::format("{} (not written):\n", script.string()).c_str() : "");
    std::fputs(text.c_str(), stdout);
    std::printf("\n");
    std::fflush(stdout);
    run(planned);  // its own dry run: config, plan, memory, the rank layout
    return;
  }
  // The config and the layout checked as the ranks will check them, before anything starts.
  planned.quiet = true;
  run(planned);
  if (batch) {
    fs::create_directories(script.parent_path());
    write_atomically(script, text);
    const std::string id = submit(script);
    std::printf("%s\nsubmitted batch job %s: script %s, log %s/slurm-%s.out\n", banner.c_str(), id.c_str(),
                script.string().c_str(), script.parent_path().string().c_str(), id.c_str());
    return;
  }
  exec_attached(p, rank, banner);
}

void launch_inference(const std::string& profile, const std::string& env_file, int tensor_parallel_size,
                      int expert_parallel_size) {
  const EnvProfile p = find_profile("--run", profile, env_file);
  const int64_t world = p.world_size();
  const int E = std::max(expert_parallel_size, 1);
  if (world % E != 0)
    throw InputError(fmt::format("--expert-parallel-size {}: --run {} starts {} ranks ([{}] of {}), which {} does not "
                                 "divide (the model is split over tensor x expert ranks)",
                                 E, profile, world, p.name, p.file, E));
  if (tensor_parallel_size > 0 && tensor_parallel_size * E != world)
    throw InputError(
        E > 1 ? fmt::format("--tensor-parallel-size {} x --expert-parallel-size {}: --run {} starts {} ranks ([{}] of {}), "
                            "which the model is split over; leave --tensor-parallel-size out or pass {}",
                            tensor_parallel_size, E, profile, world, p.name, p.file, world / E)
              : fmt::format("--tensor-parallel-size {}: --run {} starts {} ranks ([{}] of {}), which the model "
                            "is split over; leave the flag out or pass {}",
                            tensor_parallel_size, profile, world, p.name, p.file, world));
  // Each rank runs this command line as it was typed, without --run and --env-file.
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> typed;
  for (std::string word; std::getline(in, word, '\0');) typed.push_back(word);
  std::vector<std::string> rank = {fs::read_symlink("/proc/self/exe").string()};
  for (size_t i = 1; i < typed.size(); ++i) {
    const std::string& w = typed[i];
    if (w == "-r" || w == "--run" || w == "--env-file") {
      ++i;  // and its value
      continue;
    }
    if (w.rfind("--run=", 0) == 0 || w.rfind("--env-file=", 0) == 0) continue;
    rank.push_back(w);
  }
  // The tensor size the ranks split the model by: what is left of the world after the expert ranks.
  if (tensor_parallel_size <= 0) rank.insert(rank.end(), {"--tensor-parallel-size", std::to_string(world / E)});
  exec_attached(p, rank, run_banner("--run", p));
}

}  // namespace nemotron::cli
