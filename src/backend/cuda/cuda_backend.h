// The CUDA backend: one device, one stream, and a caching allocator (no cudaMalloc per step:
// freed blocks are kept in size-sorted free lists and reused; a failed allocation releases the
// cache and retries, then reports what was asked, what is free and which config knob lowers it).
// Ops reach the stream through ctx.backend (see cuda_stream()).
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <unordered_map>

#include "core/backend.h"
#include "core/context.h"

namespace nemotron::cuda {

int device_count();  // 0 without a driver or a GPU (never throws)

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device_index = 0);
  ~CudaBackend() override;
  Device device() const override { return Device{DeviceKind::cuda, index_}; }
  std::string name() const override;
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) override;
  void fill_zero(void* ptr, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy_on_device(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;
  size_t bytes_in_use() const override { return in_use_; }
  size_t peak_bytes() const override { return peak_; }
  size_t cached_bytes() const { return cached_; }
  size_t available_bytes() const override;
  // The peak from now on starts at what is in use (benchmarks: the peak of one phase).
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    peak_ = in_use_;
  }
  void release_cache();  // returns every cached block to the driver
  cudaStream_t stream() const { return stream_; }
  int index() const { return index_; }
  // Library handles bound to this device and stream, created on first use.
  cublasHandle_t cublas();
  cublasLtHandle_t cublaslt();
  // A device workspace for cuBLASLt matmuls (kLtWorkspaceBytes, allocated once).
  static constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;
  void* lt_workspace();

 private:
  void* allocate_fresh(size_t rounded);
  int index_;
  cudaStream_t stream_ = nullptr;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;            // rounded size -> block
  std::unordered_map<void*, size_t> block_size_;  // every live or cached block
  size_t in_use_ = 0, peak_ = 0, cached_ = 0;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  void* lt_workspace_ = nullptr;
};

// The stream of the context's backend (which must be a CudaBackend), and its library handles.
cudaStream_t cuda_stream(const Context& ctx);
CudaBackend& cuda_backend(const Context& ctx);
inline cublasHandle_t cublas_handle(const Context& ctx) { return cuda_backend(ctx).cublas(); }
inline cublasLtHandle_t cublaslt_handle(const Context& ctx) { return cuda_backend(ctx).cublaslt(); }

}  // namespace nemotron::cuda
