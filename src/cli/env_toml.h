// env.toml: where a training command runs (pipeline-and-rl.md §4.4). Every section except the
// reserved ones ([wandb], [artifacts], [cache], [cli]) is an execution profile; `extends = "other"`
// inherits another profile's keys, recursively. This build runs two executors: "local" (ranks
// started by mpirun on this machine) and "slurm" (srun inside an allocation, or an sbatch script).
// Every mistake (an unknown key or profile, a wrong type, a cycle of extends) is one InputError
// naming the file, the profile and the key, before anything starts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nemotron::cli {

struct EnvProfile {
  std::string file, name;  // where it was read, for messages
  std::string executor = "local";
  int64_t nproc_per_node = 1;                    // local
  int64_t nodes = 1, ntasks_per_node = 1;        // slurm
  int64_t gpus_per_node = 0, cpus_per_task = 0;  // 0: not asked for
  double gpu_memory_gib = 0;  // each GPU's memory for the dry run's planner (0: assume an 80 GiB H100)
  std::string account, partition, run_partition, batch_partition;
  std::string time = "04:00:00", mem;
  bool exclusive = false;
  std::string container_image;  // Pyxis (srun --container-image); mounts need it
  std::vector<std::string> mounts, startup_commands;

  // Ranks the profile starts: nproc_per_node (local) or nodes x ntasks_per_node (slurm).
  int64_t world_size() const { return executor == "local" ? nproc_per_node : nodes * ntasks_per_node; }
  int64_t ranks_per_node() const { return executor == "local" ? nproc_per_node : ntasks_per_node; }
};

// The env.toml that applies from `start_dir`: the first found walking up to the root; "" if none.
std::string find_env_file(const std::string& start_dir);

// Profile `profile` of `text` (read from `file`, named in errors), its extends chain resolved.
EnvProfile parse_env_profile(const std::string& text, const std::string& file, const std::string& profile);
// The same from the file itself (InputError when it cannot be read).
EnvProfile load_env_profile(const std::string& file, const std::string& profile);

}  // namespace nemotron::cli
