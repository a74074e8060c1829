// The launch commands built from an env.toml profile (cli/launch.h): mpirun for a local profile,
// the sbatch script (#SBATCH lines, requeue, srun --mpi=pmix) for a slurm one, shell quoting.
#include <gtest/gtest.h>

#include "cli/env_toml.h"
#include "cli/launch.h"

namespace nemotron::cli {
namespace {

const char* kEnv = R"(
[wandb]
project = "nemotron"

[local2]
executor = "local"
nproc_per_node = 2
startup_commands = ["echo hi"]

[cluster]
executor = "slurm"
account = "acct"
partition = "batch"
nodes = 4
ntasks_per_node = 8
gpus_per_node = 8
time = "01:30:00"
container_image = "/images/nemotron.sqsh"
mounts = ["/lustre:/lustre"]

[cluster-small]
extends = "cluster"
nodes = 1
batch_partition = "backfill"
)";

EnvProfile parse(const std::string& profile, const std::string& text = kEnv) {
  return parse_env_profile(text, "env.toml", profile);
}

TEST(Launch, local_profile_runs_mpirun_with_the_same_command) {
  const std::vector<std::string> rank = {"/bin/nemotron", "super3", "pretrain", "-c", "tiny", "train.train_iters=2"};
  const auto a = mpirun_argv(parse("local2"), rank, /*root=*/true);
  const std::vector<std::string> want = {"mpirun", "-np", "2", "--allow-run-as-root", "--oversubscribe",
                                         "/bin/nemotron", "super3", "pretrain", "-c", "tiny", "train.train_iters=2"};
  EXPECT_EQ(a, want);
  EXPECT_EQ(mpirun_argv(parse("local2"), rank, false).size(), rank.size() + 4);  // not as root
}

TEST(Launch, sbatch_script_has_the_profile_requeue_and_srun) {
  const std::string s = sbatch_script(parse("cluster-small"), {"/bin/nemotron", "super3", "pretrain", "a b=c"},
                                      "/runs/x", "/work", "nemotron-super3-pretrain");
  for (const char* want : {"#SBATCH --nodes=1\n", "#SBATCH --ntasks-per-node=8\n", "#SBATCH --gpus-per-node=8\n",
                           "#SBATCH --partition=backfill\n", "#SBATCH --account=acct\n", "#SBATCH --time=01:30:00\n",
                           "#SBATCH --requeue\n", "#SBATCH --output=/runs/x/slurm-%j.out\n", "#SBATCH --chdir=/work\n",
                           "srun --mpi=pmix --nodes=1 --ntasks-per-node=8 --gpus-per-node=8 "
                           "--container-image=/images/nemotron.sqsh --container-mounts=/lustre:/lustre "
                           "/bin/nemotron super3 pretrain 'a b=c'\n"})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\nnot in:\n" << s;
}

TEST(Launch, shell_quote_round_trips_odd_words) {
  EXPECT_EQ(shell_quote("train.lr=1e-3"), "train.lr=1e-3");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
}

}  // namespace
}  // namespace nemotron::cli
