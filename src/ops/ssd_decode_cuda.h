// CUDA kernel of ssd_decode.h on raw pointers (free of the C++ core). x, Bm, Cm, D and y are float32
// or bfloat16 (`bf16`); dt, A and the state are float32 (stat_dtype). slot_ids and cu_seqlens are
// int32 on the device and are never read by the host. N <= kSsdDecodeCudaMaxN.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

constexpr int64_t kSsdDecodeCudaMaxN = 256;

struct SsdDecodeCudaArgs {
  const void* x = nullptr;   // [Ntot, nH, P]
  const float* dt = nullptr; // [Ntot, nH]
  const float* A = nullptr;  // [nH]
  const void* Bm = nullptr;  // [Ntot, G, N]
  const void* Cm = nullptr;  // [Ntot, G, N]
  const void* D = nullptr;   // [nH]
  float* state = nullptr;    // [slots, nH, P, N]
  void* y = nullptr;         // [Ntot, nH, P]
  const int32_t* slot_ids = nullptr;    // [S]
  const int32_t* cu_seqlens = nullptr;  // [S+1]
  int64_t S = 0, nH = 0, P = 0, G = 0, N = 0, slots = 0;
  bool bf16 = false;
};

// A sequence whose slot lies outside [0, slots) gets NaN rows and touches no state.
cudaError_t ssd_decode_cuda(const SsdDecodeCudaArgs& a, cudaStream_t stream);

}  // namespace nemotron::ops
