// Attention on CUDA: picks the flash (tensor-core) or simt path and runs the backward's
// D = rowsum(dO o O) precompute into stream-ordered scratch.
#include <cuda_bf16.h>

#include "ops/attention_internal_cuda.h"
#include "ops/cuda_vec_io.cuh"

namespace nemotron::ops {

namespace {

using vec_io::to_f;

constexpr int kRowsPerBlock = 8;  // one warp per row

template <class T>
__global__ void row_dot_kernel(const T* dout, const T* o, float* d, int64_t rows, int64_t T_, int64_t nq, int64_t hd) {
  const int64_t row = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + threadIdx.x / 32;  // (b, t, h) order
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  float acc = 0;
  for (int64_t c = lane; c < hd; c += 32) acc += to_f(dout[row * hd + c]) * to_f(o[row * hd + c]);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) {
    const int64_t h = row % nq, t = (row / nq) % T_, b = row / (nq * T_);
    d[(b * nq + h) * T_ + t] = acc;
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// The flash kernels load rows with 16-byte copies: bf16, hd a multiple of 8, aligned bases.
bool use_flash(const AttentionCudaArgs& a, bool backward) {
  if (!a.bf16 || a.hd % 8 != 0) return false;
  bool ok = aligned16(a.q) && aligned16(a.k) && aligned16(a.v);
  if (backward) ok = ok && aligned16(a.dout);
  return ok;
}

}  // namespace

namespace attn {

cudaError_t row_dot(const AttentionCudaArgs& a, float* d, cudaStream_t s) {
  const int64_t rows = a.B * a.T * a.nq;
  const unsigned blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  if (a.bf16)
    row_dot_kernel<<<blocks, kRowsPerBlock * 32, 0, s>>>(static_cast<const __nv_bfloat16*>(a.dout),
                                                         static_cast<const __nv_bfloat16*>(a.o), d, rows, a.T, a.nq, a.hd);
  else
    row_dot_kernel<<<blocks, kRowsPerBlock * 32, 0, s>>>(static_cast<const float*>(a.dout),
                                                         static_cast<const float*>(a.o), d, rows, a.T, a.nq, a.hd);
  return cudaGetLastError();
}

}  // namespace attn

namespace {

// The kernels read a.Tk; callers that leave it 0 mean T keys.
AttentionCudaArgs with_keys(AttentionCudaArgs a) {
  if (a.Tk == 0) a.Tk = a.T;
  return a;
}

}  // namespace

cudaError_t attention_forward_cuda(const AttentionCudaArgs& args, cudaStream_t s) {
  const AttentionCudaArgs a = with_keys(args);
  if (a.B * a.T * a.nq == 0) return cudaSuccess;
  if (a.Tk < a.T) return cudaErrorInvalidValue;
  if (a.hd < 1 || a.hd > attention_cuda_max_hd) return cudaErrorInvalidValue;
  return use_flash(a, false) ? attn::flash_forward(a, s) : attn::simt_forward(a, s);
}

cudaError_t attention_backward_cuda(const AttentionCudaArgs& args, cudaStream_t s) {
  const AttentionCudaArgs a = with_keys(args);
  if (a.B * a.T * a.nq == 0) return cudaSuccess;
  if (a.Tk < a.T) return cudaErrorInvalidValue;
  if (a.hd < 1 || a.hd > attention_cuda_max_hd) return cudaErrorInvalidValue;
  float* d = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&d), a.B * a.nq * a.T * sizeof(float), s);
  if (err != cudaSuccess) return err;
  err = attn::row_dot(a, d, s);
  if (err == cudaSuccess) err = use_flash(a, true) ? attn::flash_backward(a, d, s) : attn::simt_backward(a, d, s);
  cudaError_t free_err = cudaFreeAsync(d, s);
  return err != cudaSuccess ? err : free_err;
}

}  // namespace nemotron::ops
