// CUDA kernels of adamw.h on raw pointers (free of the C++ core). A slot is one parameter; the
// work list names (slot, first element) chunks of kOptimizerChunk elements, so one launch covers
// every tensor whatever their sizes.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nemotron::ops {

constexpr int64_t kOptimizerChunk = 32768;

struct OptimizerSlot {
  float* truth = nullptr;    // the float32 value, or the master of a bf16 value
  void* value_bf16 = nullptr; // the bf16 value written as bf16(master), or null
  float* grad = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  int64_t numel = 0;
  float weight_decay = 0;    // 1 or 0: does the step's weight decay apply
  int32_t vec4 = 0;          // every pointer is 16-byte aligned: float4 loads
};

struct OptimizerWork {
  int64_t slot = 0;
  int64_t begin = 0;
};

struct AdamWCudaStep {
  float lr = 0, beta1 = 0, beta2 = 0, eps = 0;
  float inv_bc1 = 1, inv_bc2 = 1;  // 1 / (1 - beta^t)
  float weight_decay = 0;          // times each slot's weight_decay (1 or 0)
  float grad_scale = 1;            // times every gradient (clipping)
};

// slots/work are device arrays; `items` is the length of work.
cudaError_t adamw_cuda(const OptimizerSlot* slots, const OptimizerWork* work, int64_t items, const AdamWCudaStep& s,
                       cudaStream_t stream);
// Sum of squares of every slot's grad, in float64, read back into *sum_sq (waits for the stream).
cudaError_t grad_sum_sq_cuda(const OptimizerSlot* slots, const OptimizerWork* work, int64_t items, double* sum_sq,
                             cudaStream_t stream);
cudaError_t scale_grads_cuda(const OptimizerSlot* slots, const OptimizerWork* work, int64_t items, float scale,
                             cudaStream_t stream);

}  // namespace nemotron::ops
