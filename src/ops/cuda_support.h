// Which ops have a CUDA kernel (the harness's support mode checks each has a case; cases of ops
// without one are skipped on CUDA targets with a message).
#pragma once
#include <string>
#include <vector>

namespace nemotron::ops {

const std::vector<std::string>& cuda_supported_ops();
bool cuda_supports(const std::string& op);

}  // namespace nemotron::ops
