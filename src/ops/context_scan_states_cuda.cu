// CUDA kernels of context_scan_states.h: chunk_decay is one warp per (row, head) summing dt over
// the chunk in a fixed order; the compositions run one thread per (row b, state element i), each
// walking the 2C chunks in sequence order (forward) or reverse (backward) in registers: a few
// multiply-adds per chunk on data that is a few MB, so the kernels cost microseconds.
#include "ops/context_scan_states_cuda.h"

namespace nemotron::ops {

namespace {

constexpr int kThreads = 256;

__global__ void chunk_decay_kernel(const float* dt, const float* A, float* decay, int64_t R, int64_t L, int64_t nH) {
  const int64_t w = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;  // (r, h)
  if (w >= R * nH) return;
  const int lane = threadIdx.x % 32;
  const int64_t r = w / nH, h = w % nH;
  float sum = 0.0f;
  for (int64_t t = lane; t < L; t += 32) sum += dt[(r * L + t) * nH + h];
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) decay[w] = expf(A[h] * sum);
}

// The chunk order of model/context_split.h (see context_scan_states_cpu.cpp's Chain).
struct Order {
  ContextStatesCudaArgs a;
  __device__ int64_t row(int64_t g, int64_t b) const {
    return g < a.C ? g * 2 * a.B + 2 * b : (2 * a.C - 1 - g) * 2 * a.B + 2 * b + 1;
  }
  __device__ bool link(int64_t g, int64_t b) const {
    return g > 0 && (!a.seq || a.seq[row(g - 1, b) * a.L + a.L - 1] == a.seq[row(g, b) * a.L]);
  }
  __device__ float decay(int64_t g, int64_t b, int64_t h) const {
    const int64_t r = row(g, b);
    if (a.seq && a.seq[r * a.L] != a.seq[r * a.L + a.L - 1]) return 0.0f;
    return a.decay[r * a.nH + h];
  }
};

__global__ void forward_kernel(ContextStatesCudaArgs a) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= a.B * a.S) return;
  const int64_t b = t / a.S, i = t % a.S, h = i / (a.S / a.nH), G = 2 * a.C;
  const Order o{a};
  const int64_t g0 = a.rank, g1 = G - 1 - a.rank;  // this rank's chunks (g0 < g1)
  float s = 0.0f;                                  // S_0
  for (int64_t g = 0; g < g1; ++g) {
    if (g == g0) a.out[(2 * b) * a.S + i] = s;
    s = o.link(g + 1, b) ? a.in[o.row(g, b) * a.S + i] + o.decay(g, b, h) * s : 0.0f;
  }
  a.out[(2 * b + 1) * a.S + i] = s;
}

__global__ void backward_kernel(ContextStatesCudaArgs a) {
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (t >= a.B * a.S) return;
  const int64_t b = t / a.S, i = t % a.S, h = i / (a.S / a.nH), G = 2 * a.C;
  const Order o{a};
  const int64_t g0 = a.rank, g1 = G - 1 - a.rank;
  float ds = 0.0f;  // dS_{g+1}
  for (int64_t g = G - 1; g >= g0; --g) {
    const float df = g + 1 < G && o.link(g + 1, b) ? ds : 0.0f;
    if (g == g1) a.out[(2 * b + 1) * a.S + i] = df;
    if (g == g0) {
      a.out[(2 * b) * a.S + i] = df;
      break;
    }
    ds = a.in[o.row(g, b) * a.S + i] + o.decay(g, b, h) * df;
  }
}

unsigned blocks(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

}  // namespace

cudaError_t chunk_decay_cuda(const float* dt, const float* A, float* decay, int64_t R, int64_t L, int64_t nH,
                             cudaStream_t stream) {
  if (R * nH == 0) return cudaSuccess;
  chunk_decay_kernel<<<blocks(R * nH * 32), kThreads, 0, stream>>>(dt, A, decay, R, L, nH);
  return cudaGetLastError();
}

cudaError_t context_states_forward_cuda(const ContextStatesCudaArgs& a, cudaStream_t stream) {
  if (a.B * a.S == 0) return cudaSuccess;
  forward_kernel<<<blocks(a.B * a.S), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t context_states_backward_cuda(const ContextStatesCudaArgs& a, cudaStream_t stream) {
  if (a.B * a.S == 0) return cudaSuccess;
  backward_kernel<<<blocks(a.B * a.S), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace nemotron::ops
