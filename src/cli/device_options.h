// The options the commands that run a model for inference (generate, serve) share, in one
// wording: --device and --dtype (one set of accepted values; train::inference_dtype reads them),
// and -r/--run with --env-file (where their ranks start: cli/launch.h's launch_inference).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace nemotron::cli {

void add_inference_device_options(CLI::App* c, std::string& device, std::string& dtype);
void add_inference_launch_options(CLI::App* c, std::string& run_profile, std::string& env_file);

}  // namespace nemotron::cli
