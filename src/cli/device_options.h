// The --device and --dtype options of the commands that run a model for inference (generate,
// serve): one wording and one set of accepted values (train::inference_dtype reads them).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace nemotron::cli {

void add_inference_device_options(CLI::App* c, std::string& device, std::string& dtype);

}  // namespace nemotron::cli
