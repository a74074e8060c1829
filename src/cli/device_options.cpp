#include "cli/device_options.h"

namespace nemotron::cli {

void add_inference_device_options(CLI::App* c, std::string& device, std::string& dtype) {
  c->add_option("--device", device, "auto (a GPU when this build has CUDA and one is visible, else the CPU), cpu, cuda or cuda:N")
      ->capture_default_str();
  c->add_option("--dtype", dtype,
                "Compute dtype: auto (bfloat16 on CUDA, float32 on the CPU), float32, bfloat16 (CUDA), float64 (CPU)")
      ->check(CLI::IsMember({"auto", "float32", "bfloat16", "float64"}))
      ->capture_default_str();
}

void add_inference_launch_options(CLI::App* c, std::string& run_profile, std::string& env_file) {
  c->add_option("-r,--run", run_profile,
                "Start the ranks of env.toml profile PROFILE (local: mpirun; slurm: srun in the allocation) with the "
                "model split over all of them");
  c->add_option("--env-file", env_file, "env.toml to read --run's profile from (default: ./env.toml or the first "
                                        "walking up from the current directory)");
}

}  // namespace nemotron::cli
