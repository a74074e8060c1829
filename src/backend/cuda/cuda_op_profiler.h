// The op profiler for CUDA: one event pair per outermost op scope, recorded on the context's
// stream, so a phase's time is what its kernels (and the launch gaps inside its ops) take on the
// GPU. Events come from a pool that grows to the most scopes seen in one recording and is reused
// after; collect() synchronises once and sums per phase.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/op_profiler.h"

namespace nemotron::cuda {

struct OpPhaseTimes {
  std::array<double, kOpPhaseCount> ms{};
  std::array<int64_t, kOpPhaseCount> calls{};
  double gemm_flops = 0;
  double ms_of(OpPhase p) const { return ms[static_cast<size_t>(p)]; }
  int64_t calls_of(OpPhase p) const { return calls[static_cast<size_t>(p)]; }
  double total_ms() const;
  struct Op {
    OpPhase phase;
    double ms = 0;
    int64_t calls = 0;
  };
  std::map<std::string, Op> ops;  // by op name, for finding the costly ones within a phase
  // The GPU time between one scope's end and the next one's start, by the name of the op that
  // came next: where the queue ran dry (a host wait before it, slow host work, a copy or memset
  // outside every op). Their sum is the recording's time outside ops after its first scope.
  std::map<std::string, double> gap_before_ms;
};

class CudaOpProfiler final : public OpProfiler {
 public:
  CudaOpProfiler() = default;
  ~CudaOpProfiler() override;
  CudaOpProfiler(const CudaOpProfiler&) = delete;
  CudaOpProfiler& operator=(const CudaOpProfiler&) = delete;

  void begin(Context& ctx, OpPhase phase, const char* op) override;
  void end(Context& ctx) override;
  // Waits for the recorded scopes, returns their milliseconds and calls per phase (and the GEMM
  // FLOPs counted meanwhile), and starts a new recording. Throws a CUDA error met while recording.
  OpPhaseTimes collect();

 private:
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;                // events handed out in this recording (2 per scope)
  std::vector<OpPhase> phases_;    // scope i ran between events 2i and 2i + 1
  std::vector<const char*> names_; // and was this op
  cudaStream_t stream_ = nullptr;  // of the open scope
  cudaError_t error_ = cudaSuccess;
};

}  // namespace nemotron::cuda
