#include "core/op_profiler.h"

namespace nemotron {

const char* op_phase_name(OpPhase phase) {
  switch (phase) {
    case OpPhase::gemm: return "gemm";
    case OpPhase::attention: return "attention";
    case OpPhase::ssd_scan: return "ssd_scan";
    case OpPhase::moe_routing: return "moe_routing";
    case OpPhase::elementwise: return "elementwise";
    case OpPhase::loss: return "loss";
    case OpPhase::optimizer: return "optimizer";
  }
  return "unknown";
}

}  // namespace nemotron
