#include "backend/cuda/cuda_graph.h"

#include "backend/cuda/cuda_check.h"

namespace nemotron::cuda {

CudaGraph::~CudaGraph() {
  if (exec_) cudaGraphExecDestroy(exec_);
}

void CudaGraph::capture(const std::function<void()>& body) {
  if (exec_) {
    NM_CUDA_CHECK(cudaGraphExecDestroy(exec_));
    exec_ = nullptr;
  }
  cudaStream_t s = backend_->stream();
  // Relaxed: the allocator may still reach cudaMalloc (a private pool growing); stream syncs and
  // the legacy stream stay errors.
  NM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  cudaGraph_t graph = nullptr;
  try {
    body();
  } catch (...) {
    cudaStreamEndCapture(s, &graph);  // ends the (possibly invalidated) capture
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  NM_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaError_t err = cudaGraphGetNodes(graph, nullptr, &nodes_);
  if (err == cudaSuccess) err = cudaGraphInstantiate(&exec_, graph, 0);
  cudaGraphDestroy(graph);
  NM_CUDA_CHECK(err);
}

void CudaGraph::launch() {
  NM_CHECK(exec_, "CudaGraph::launch before a capture");
  NM_CUDA_CHECK(cudaGraphLaunch(exec_, backend_->stream()));
}

}  // namespace nemotron::cuda
