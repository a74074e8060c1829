// The machine's physical memory, for the commands that refuse up front a run that cannot fit
// (pretrain, model demo) rather than die of std::bad_alloc or the OOM killer half-way.
#pragma once

namespace nemotron::cli {

// Bytes of physical memory; 0 when the system does not say.
double physical_memory_bytes();

}  // namespace nemotron::cli
