// env.toml profiles (cli/env_toml.h): keys, defaults, extends, and one error naming file, profile
// and key for every mistake.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/env_toml.h"
#include "core/error.h"

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

// The InputError message of parsing `text` for `profile` ("" when it parses).
std::string error_of(const std::string& text, const std::string& profile) {
  try {
    parse(profile, text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(EnvToml, reads_a_local_profile_with_defaults_for_the_rest) {
  const EnvProfile p = parse("local2");
  EXPECT_EQ(p.executor, "local");
  EXPECT_EQ(p.nproc_per_node, 2);
  EXPECT_EQ(p.world_size(), 2);
  EXPECT_EQ(p.time, "04:00:00");
  EXPECT_EQ(p.startup_commands, std::vector<std::string>{"echo hi"});
  EXPECT_EQ(p.name, "local2");
}

TEST(EnvToml, extends_inherits_and_overrides_recursively) {
  const EnvProfile p = parse("cluster-small");
  EXPECT_EQ(p.executor, "slurm");
  EXPECT_EQ(p.nodes, 1);                // overridden
  EXPECT_EQ(p.ntasks_per_node, 8);      // inherited
  EXPECT_EQ(p.account, "acct");         // inherited
  EXPECT_EQ(p.batch_partition, "backfill");
  EXPECT_EQ(p.mounts, std::vector<std::string>{"/lustre:/lustre"});
  EXPECT_EQ(p.world_size(), 8);
  EXPECT_EQ(parse("cluster").world_size(), 32);
  EXPECT_EQ(parse("cluster-small").ranks_per_node(), 8);
  EXPECT_EQ(parse("local2").ranks_per_node(), 2);
  // The planner's GPU memory: unset (0: the dry run assumes an 80 GB H100), GiB as integer or float.
  EXPECT_EQ(parse("cluster").gpu_memory_gib, 0);
  EXPECT_EQ(parse("a", "[a]\ngpu_memory_gib = 141\n").gpu_memory_gib, 141);
  EXPECT_EQ(parse("a", "[a]\ngpu_memory_gib = 79.6\n").gpu_memory_gib, 79.6);
}

TEST(EnvToml, errors_name_file_profile_and_key) {
  EXPECT_EQ(error_of("[a]\nnodez = 2\n", "a"), "env.toml: [a] nodez: unknown key (did you mean nodes?)");
  EXPECT_EQ(error_of("[a]\nnodes = \"two\"\n", "a"), "env.toml: [a] nodes: expected a positive integer, got \"two\"");
  EXPECT_EQ(error_of("[a]\nnproc_per_node = 0\n", "a"), "env.toml: [a] nproc_per_node: expected a positive integer, got 0");
  EXPECT_EQ(error_of("[a]\nmounts = \"/x:/x\"\n", "a"), "env.toml: [a] mounts: expected an array of strings, got \"/x:/x\"");
  EXPECT_EQ(error_of("[a]\nexclusive = 1\n", "a"), "env.toml: [a] exclusive: expected true or false, got 1");
  EXPECT_EQ(error_of("[a]\ngpu_memory_gib = 0\n", "a"), "env.toml: [a] gpu_memory_gib: expected a positive number of GiB, got 0");
  EXPECT_EQ(error_of("[a]\nexecutor = \"docker\"\n", "a"),
            "env.toml: [a] executor: \"docker\" is not an executor of this build (expected \"local\" or \"slurm\")");
  EXPECT_EQ(error_of("[a]\ntime = \"4 hours\"\n", "a"),
            "env.toml: [a] time: expected a Slurm time limit like \"04:00:00\" or \"1-00:00:00\", got \"4 hours\"");
  EXPECT_EQ(error_of("[a]\nexecutor = \"local\"\n", "b"), "env.toml: no profile [b] (profiles: a)");
  EXPECT_EQ(error_of("[wandb]\nproject = \"x\"\n", "wandb"), "env.toml: [wandb] is a reserved section, not an execution profile");
  // In a base profile, the error names the profile that holds the key.
  EXPECT_EQ(error_of("[a]\nnodes = -1\n[b]\nextends = \"a\"\n", "b"),
            "env.toml: [a] nodes: expected a positive integer, got -1");
  EXPECT_EQ(error_of("[b]\nextends = \"zz\"\n", "b"), "env.toml: [b] extends: no profile \"zz\" in this file");
  EXPECT_EQ(error_of("[a]\nextends = \"b\"\n[b]\nextends = \"a\"\n", "a"),
            "env.toml: [b] extends: \"a\" makes a cycle (a -> b -> a)");
  EXPECT_EQ(error_of("[a]\nmounts = [\"/x:/x\"]\n", "a"),
            "env.toml: [a] mounts: bind mounts are for a container (Pyxis: srun --container-mounts); set container_image too");
  EXPECT_EQ(error_of("[a\nnodes = 1\n", "a").rfind("env.toml:1:", 0), 0u) << error_of("[a\nnodes = 1\n", "a");
}

TEST(EnvToml, found_walking_up_from_the_current_directory) {
  const auto root = std::filesystem::temp_directory_path() / ("env_toml_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(root / "a" / "b");
  EXPECT_EQ(find_env_file((root / "a" / "b").string()).find((root / "env.toml").string()), std::string::npos);
  std::ofstream(root / "env.toml") << "[x]\n";
  EXPECT_EQ(find_env_file((root / "a" / "b").string()), (root / "env.toml").string());
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace nemotron::cli
