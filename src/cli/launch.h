// `--run PROFILE` and `--batch PROFILE` on the training commands (and --run on generate and serve): the same command started as the
// ranks an env.toml profile asks for, by the launchers that exist (no home-made cluster manager):
//  - executor local, --run: `mpirun -np nproc_per_node nemotron <same args>`, replacing this
//    process, so the output streams and mpirun's exit code is the command's;
//  - executor slurm, --run: `srun --mpi=pmix ...` inside the current allocation (SLURM_JOB_ID);
//  - executor slurm, --batch: an sbatch script written beside the run (checkpoint.save) and
//    submitted; it requeues, and a requeued job resumes from the run's latest checkpoint.
// With --dry-run: the launcher's command or the script, then the command's own dry run (config,
// plan, memory) at the profile's world size with its rank layout; nothing is started or written.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "cli/env_toml.h"
#include "cli/training_command.h"

namespace nemotron::cli {

// Launches `o` as `o.run_profile` / `o.batch_profile` says (exactly one is set). `run` is the
// command itself, called only for --dry-run. --run replaces this process with the launcher (its
// exit code is the command's); --batch returns once submitted. Failures throw.
void launch_training(const TrainingCommandOptions& o, const std::function<int(const TrainingCommandOptions&)>& run);

// `--run PROFILE` on generate and serve: this command line as typed (without --run and
// --env-file) as the profile's ranks, the model split over all of them: tensor x expert ranks
// (--tensor-parallel-size world / expert_parallel_size added when not given; given, it times
// expert_parallel_size must equal the profile's world size). Replaces this process with the
// launcher; failures throw.
[[noreturn]] void launch_inference(const std::string& profile, const std::string& env_file, int tensor_parallel_size,
                                   int expert_parallel_size = 1);

// The pieces, for tests and --dry-run (no side effects).
// The command each rank runs: this binary, the family, stage, -c and the overrides.
std::vector<std::string> rank_argv(const TrainingCommandOptions& o, const std::string& exe);
// `mpirun ...` for a local profile (`root`: add --allow-run-as-root).
std::vector<std::string> mpirun_argv(const EnvProfile& p, const std::vector<std::string>& rank, bool root);
// `srun --mpi=pmix ...` for a slurm profile.
std::vector<std::string> srun_argv(const EnvProfile& p, const std::vector<std::string>& rank);
// The sbatch script: #SBATCH lines, startup commands, srun. `run_dir` is absolute (the log goes there).
std::string sbatch_script(const EnvProfile& p, const std::vector<std::string>& rank, const std::string& run_dir,
                          const std::string& work_dir, const std::string& job_name);
// A word as the shell reads it back unchanged.
std::string shell_quote(const std::string& word);

}  // namespace nemotron::cli
