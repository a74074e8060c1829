// CUDA kernels of embedding.h on raw pointers (free of the C++ core so nvcc compiles only
// kernels). w, y, dy are float32 or bfloat16 (`bf16`); dw is float32 (grad_dtype); ids are int32
// or int64 (`ids64`) on the device.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

struct EmbeddingCudaArgs {
  const void* ids = nullptr;
  bool ids64 = false;
  int64_t N = 0, V = 0, D = 0;     // V: rows of w / dw
  // w / dw hold rows [vocab_begin, vocab_begin + V) of a vocabulary of vocab_size: ids outside
  // [0, vocab_size) are flagged, ids outside the rows give zero rows (forward) or add nothing.
  int64_t vocab_begin = 0, vocab_size = 0;
  const void* w = nullptr;  // forward: [V, D]
  void* y = nullptr;        // forward: [N, D]
  const void* dy = nullptr; // backward: [N, D]
  float* dw = nullptr;      // backward: [V, D], accumulated (+=)
  bool bf16 = false;
};

// Both read back (one 8-byte copy, which waits for the stream) the first position whose id is
// outside [0, vocab_size) into *bad_position, or -1 when every id is in range; nothing is written then.
// The forward with bad_position null reads nothing back and never waits (ids the caller checked;
// one outside the vocabulary gets a zero row), so a CUDA graph can capture it.
cudaError_t embedding_forward_cuda(const EmbeddingCudaArgs& a, cudaStream_t stream, int64_t* bad_position);
// Deterministic: the (id, position) pairs are sorted on the device and each distinct id sums its
// rows of dy in position order, so repeated ids add in a fixed order without atomics.
// bad_position null: no flag is read back (ids the caller checked), so the call never waits.
cudaError_t embedding_backward_cuda(const EmbeddingCudaArgs& a, cudaStream_t stream, int64_t* bad_position);

}  // namespace nemotron::ops
