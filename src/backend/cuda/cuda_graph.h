// A CUDA graph of work queued on a CudaBackend's stream: capture() records what a function queues
// (nothing runs then), launch() replays it. The captured kernels keep the addresses they were
// given, so the caller owns keeping them valid (CudaBackend's private pools) and feeds new inputs
// by copying into the same buffers before each launch. Host syncs inside the function fail the
// capture with an Error naming the CUDA call.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>

#include "backend/cuda/cuda_backend.h"

namespace nemotron::cuda {

class CudaGraph {
 public:
  explicit CudaGraph(CudaBackend& backend) : backend_(&backend) {}
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();

  // Records what `body` queues on the backend's stream and instantiates it (replacing any earlier
  // capture). If body throws, or a call inside it is not allowed under capture, the capture is
  // ended and discarded and the error propagates.
  void capture(const std::function<void()>& body);
  bool captured() const { return exec_ != nullptr; }
  // Queues one replay on the backend's stream (asynchronous, as the work it captured).
  void launch();
  // Kernel nodes in the captured graph (for logs and tests).
  size_t nodes() const { return nodes_; }

 private:
  CudaBackend* backend_;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};

}  // namespace nemotron::cuda
