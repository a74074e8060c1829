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

}  // namespace nemotron::cli
