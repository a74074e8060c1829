// One block of kThreads threads per row. Thread t owns the contiguous chunk
// [t * chunk, (t + 1) * chunk) of the row, so the cumulative distribution can be walked in id
// order: (1) the row max (and, greedy, the argmax with the lowest id), (2) each chunk's sum of
// the tempered weights exp((z - m) / T) (and of exp(z - m) for the raw log-sum-exp when T != 1)
// in double, (3) thread 0 takes the chunk sums in order into prefix sums P, (4) the one chunk t
// with P[t] <= u * total < P[t + 1] walks its ids until the sum passes u * total. The prefix sums
// are non-decreasing, so these half-open ranges are disjoint and cover [0, total): exactly one
// chunk claims, with no slack and no atomic; u * total can round up to total (u just below 1),
// and then the last chunk with a non-empty range claims. Its walk re-adds the weights one by one,
// which can end a rounding step short of target: it then takes its last id of non-zero weight.
// Reads the row three times; at S = 256, V = 131072 in bf16 that is 192 MiB from L2/HBM.
#include <cfloat>
#include <cstdint>

#include "ops/sample_rows_cuda.h"

namespace nemotron::ops {

namespace {

constexpr int kThreads = 512;

__device__ inline float load(const float* p, int64_t i) { return p[i]; }
__device__ inline float load(const uint16_t* p, int64_t i) { return __uint_as_float(static_cast<uint32_t>(p[i]) << 16); }

template <class E>
__global__ void sample_rows_kernel(const E* __restrict__ logits, const double* __restrict__ params,
                                   int32_t* __restrict__ tokens, float* __restrict__ logprobs, int64_t V) {
  __shared__ float s_max[kThreads];
  __shared__ int64_t s_arg[kThreads];
  __shared__ double s_sum[kThreads], s_raw[kThreads];
  __shared__ int64_t s_pick;
  const int t = threadIdx.x;
  const E* z = logits + static_cast<int64_t>(blockIdx.x) * V;
  const double inv_t = params[2 * blockIdx.x], u = params[2 * blockIdx.x + 1];
  const bool greedy = inv_t == 0.0;
  const int64_t chunk = (V + kThreads - 1) / kThreads;
  const int64_t lo = min(V, t * chunk), hi = min(V, lo + chunk);

  // (1) max and the first argmax over this thread's chunk, then over the block.
  float best = -FLT_MAX;
  int64_t arg = V;
  for (int64_t v = lo; v < hi; ++v) {
    const float x = load(z, v);
    if (x > best || arg == V) best = x, arg = v;
  }
  s_max[t] = best, s_arg[t] = arg;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (t < half) {
      const float a = s_max[t], b = s_max[t + half];
      const int64_t ia = s_arg[t], ib = s_arg[t + half];
      if (ia == V || (ib != V && (b > a || (b == a && ib < ia)))) s_max[t] = b, s_arg[t] = ib;
    }
    __syncthreads();
  }
  const double m = s_max[0];
  const int64_t argmax = s_arg[0];

  // (2) chunk sums in double.
  double sum = 0, raw = 0;
  const float mf = s_max[0];
  if (greedy) {
    for (int64_t v = lo; v < hi; ++v) sum += expf(load(z, v) - mf);
  } else {
    const float inv_tf = static_cast<float>(inv_t);
    for (int64_t v = lo; v < hi; ++v) {
      const float d = load(z, v) - mf;
      sum += expf(d * inv_tf);
      if (inv_t != 1.0) raw += expf(d);
    }
  }
  s_sum[t] = sum, s_raw[t] = raw;
  if (t == 0) s_pick = V;
  __syncthreads();

  // (3) prefix sums in chunk order (thread 0: kThreads additions, the same order every run).
  if (t == 0) {
    double acc = 0, acc_raw = 0;
    for (int i = 0; i < kThreads; ++i) {
      const double c = s_sum[i];
      s_sum[i] = acc;  // exclusive prefix
      acc += c;
      acc_raw += s_raw[i];
    }
    s_raw[0] = acc, s_raw[1] = acc_raw;  // totals (s_raw is free once read)
  }
  __syncthreads();
  const double total = s_raw[0], total_raw = inv_t == 1.0 || greedy ? s_raw[0] : s_raw[1];

  if (greedy) {
    if (t == 0) {
      tokens[blockIdx.x] = static_cast<int32_t>(argmax);
      const float lp = static_cast<float>(static_cast<double>(load(z, argmax)) - (m + log(total)));
      logprobs[2 * blockIdx.x] = lp, logprobs[2 * blockIdx.x + 1] = lp;
    }
    return;
  }

  // (4) the chunk whose range [P[t], P[t + 1]) holds target walks its ids.
  const double target = u * total;
  const double p0 = s_sum[t], p1 = t + 1 < kThreads ? s_sum[t + 1] : total;
  if (p0 < p1 && p0 <= target && (target < p1 || (p1 == total && target >= total))) {
    const float inv_tf = static_cast<float>(inv_t);
    double cum = p0;
    int64_t pick = -1, last_weighted = lo;
    for (int64_t v = lo; v < hi; ++v) {
      const float w = expf((load(z, v) - mf) * inv_tf);
      if (w > 0.0f) last_weighted = v;
      cum += w;
      if (target < cum) {
        pick = v;
        break;
      }
    }
    s_pick = pick >= 0 ? pick : last_weighted;
  }
  __syncthreads();
  if (t == 0) {
    const int64_t pick = s_pick == V ? V - 1 : s_pick;
    const float zp = load(z, pick);
    const double w = expf((zp - mf) * static_cast<float>(inv_t));
    tokens[blockIdx.x] = static_cast<int32_t>(pick);
    logprobs[2 * blockIdx.x] = static_cast<float>(log(w / total));
    logprobs[2 * blockIdx.x + 1] = static_cast<float>(static_cast<double>(zp) - (m + log(total_raw)));
  }
}

}  // namespace

cudaError_t sample_rows_cuda(const SampleRowsCudaArgs& a, cudaStream_t s) {
  if (a.S == 0) return cudaSuccess;
  if (a.V <= 0 || a.S > 0x7fffffff) return cudaErrorInvalidValue;
  const unsigned blocks = static_cast<unsigned>(a.S);
  if (a.elem_size == 2)
    sample_rows_kernel<uint16_t><<<blocks, kThreads, 0, s>>>(static_cast<const uint16_t*>(a.logits), a.params,
                                                             a.tokens, a.logprobs, a.V);
  else if (a.elem_size == 4)
    sample_rows_kernel<float><<<blocks, kThreads, 0, s>>>(static_cast<const float*>(a.logits), a.params, a.tokens,
                                                          a.logprobs, a.V);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

}  // namespace nemotron::ops
