// CUDA kernels of ssd_scan.h on raw pointers (free of the C++ core so nvcc compiles only kernels).
// x, Bm, Cm, D, y, dy, dx, dBm, dCm are float32 or bfloat16 (`bf16`); dt, A, ddt, the states and
// their gradients are float32; dA and dD are float32 and accumulated (+=). Any chunk size works
// (scratch grows as chunk_size^2); the dispatch in ssd_scan_cpu.cpp fills the arguments.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct SsdScanCudaArgs {
  const void *x = nullptr, *Bm = nullptr, *Cm = nullptr, *D = nullptr;
  const float *dt = nullptr, *A = nullptr;
  const float* initial_state = nullptr;  // null = zeros
  // forward
  void* y = nullptr;
  float* final_state = nullptr;  // written when set
  // Chunk-end states (ssd_scan.h SsdChunkStates): chunk_slots [B, nc] (-1 = none) name the rows
  // of chunk_states [rows, nH, P, N] that take the state after each chunk.
  const int32_t* chunk_slots = nullptr;
  float* chunk_states = nullptr;
  // backward
  const void* dy = nullptr;
  const float* d_final_state = nullptr;  // null = zeros
  void *dx = nullptr, *dBm = nullptr, *dCm = nullptr;
  float *ddt = nullptr, *dA = nullptr, *dD = nullptr;
  float* d_initial_state = nullptr;  // written when set
  int64_t B = 0, T = 0, nH = 0, P = 0, G = 1, N = 0, Q = 128;
  bool bf16 = false;
  const int32_t* seq_idx = nullptr;  // [B, T] packed-sequence ids (ssd_scan.h); null = one per row
  // Print each phase's time (synchronises: benchmarks only). NEMOTRON_SSD_PROFILE in the
  // environment (read once, at the first call) turns it on for every call.
  bool profile = false;
};

cudaError_t ssd_scan_forward_cuda(const SsdScanCudaArgs& a, cudaStream_t stream);
cudaError_t ssd_scan_backward_cuda(const SsdScanCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
