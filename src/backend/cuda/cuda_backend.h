// The CUDA backend: one device, one stream, and a caching allocator (no cudaMalloc per step:
// freed blocks are kept in size-sorted free lists and reused; a failed allocation releases the
// cache and retries, then reports what was asked, what is free and which config knob lowers it).
// Ops reach the stream through ctx.backend (see cuda_stream()). Private pools serve CUDA graph
// capture: the addresses a captured graph reads and writes stay its own across replays.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

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
  // Private pools (a CUDA graph's memory, engine/decode_graphs.h). While pool `id` is active,
  // allocate() bump-allocates from it (growing it with fresh cudaMalloc blocks when full) and
  // deallocate() of any pool's memory is a no-op: nothing a graph captured is ever handed to
  // another tensor. rewind_pool() makes the next pass hand out the same addresses again for the
  // same sequence of requests (a warm-up pass, then the capture). free_pool() returns the memory
  // (no tensor from it, and no graph using it, may be used after).
  int64_t make_pool();
  void activate_pool(int64_t id);  // -1: the caching allocator again
  void rewind_pool(int64_t id);
  void free_pool(int64_t id);
  size_t pool_bytes(int64_t id) const;
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
  struct Pool {
    std::vector<std::pair<char*, size_t>> chunks;  // cudaMalloc'd, in the order they are filled
    size_t chunk = 0, offset = 0;                  // the bump cursor
  };
  void* pool_allocate(Pool& pool, size_t bytes);
  int index_;
  cudaStream_t stream_ = nullptr;
  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;            // rounded size -> block
  std::unordered_map<void*, size_t> block_size_;  // every live or cached block
  size_t in_use_ = 0, peak_ = 0, cached_ = 0;
  std::map<int64_t, Pool> pools_;
  int64_t next_pool_ = 0, active_pool_ = -1;
  std::map<char*, size_t> pool_chunks_;  // every pool chunk: start -> bytes (deallocate ignores them)
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
