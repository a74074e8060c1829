#include "backend/cuda/cuda_backend.h"

#include "backend/cuda/cuda_check.h"
#include "core/host_waits.h"

namespace nemotron::cuda {

namespace {
// Small blocks round to 512 B, large ones to 2 MiB, so varying activation sizes still reuse.
size_t round_size(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{2} << 20;
  if (bytes <= (size_t{1} << 20)) return std::max(kSmall, (bytes + kSmall - 1) / kSmall * kSmall);
  return (bytes + kLarge - 1) / kLarge * kLarge;
}
std::string gib(size_t b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30)); }
}  // namespace

void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line) {
  throw Error(fmt::format("CUDA error in {} at {}:{}: {} ({})", call, file, line, cudaGetErrorString(err),
                          cudaGetErrorName(err)));
}

void throw_cublas_error(const char* call, cublasStatus_t st, const char* file, int line) {
  throw Error(fmt::format("cuBLAS error in {} at {}:{}: {} ({})", call, file, line, cublasGetStatusString(st),
                          cublasGetStatusName(st)));
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

CudaBackend::CudaBackend(int device_index) : index_(device_index) {
  int n = device_count();
  if (device_index >= n)
    throw Error(fmt::format("cuda:{} requested but {} CUDA device(s) are visible (CUDA_VISIBLE_DEVICES={})",
                            device_index, n, std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "unset"));
  NM_CUDA_CHECK(cudaSetDevice(index_));
  NM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  // Kernels take short-lived scratch with cudaMallocAsync on the stream; the pool keeps what it
  // got instead of returning it at every synchronize, so steady-state steps never reach the driver.
  cudaMemPool_t pool;
  NM_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, index_));
  uint64_t keep_all = UINT64_MAX;
  NM_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(index_);
  cudaStreamSynchronize(stream_);
  for (auto& [start, bytes] : pool_chunks_) cudaFree(start);
  if (cublas_) cublasDestroy(cublas_);
  if (cublaslt_) cublasLtDestroy(cublaslt_);
  if (lt_workspace_) cudaFree(lt_workspace_);
  release_cache();
  for (auto& [p, size] : block_size_) cudaFree(p);  // blocks still held by leaked tensors
  cudaStreamDestroy(stream_);
}

std::string CudaBackend::name() const {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, index_) != cudaSuccess) return fmt::format("cuda:{}", index_);
  return fmt::format("cuda:{} ({})", index_, prop.name);
}

void* CudaBackend::allocate_fresh(size_t rounded) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, rounded);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    release_cache();
    err = cudaMalloc(&p, rounded);
  }
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    throw Error(fmt::format(
        "out of memory on cuda:{}: asked for {} with {} in use by this process and {} free of {}. Lower "
        "train.micro_batch_size or dataset.seq_length, or turn on activation recomputation (model.recompute_granularity)",
        index_, gib(rounded), gib(in_use_), gib(free_b), gib(total_b)));
  }
  NM_CUDA_CHECK(err);
  block_size_[p] = rounded;
  return p;
}

size_t CudaBackend::available_bytes() const {
  size_t free_b = 0, total_b = 0;
  cudaSetDevice(index_);
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return free_b + cached_;
}

void* CudaBackend::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (active_pool_ >= 0) return pool_allocate(pools_.at(active_pool_), bytes);
  size_t rounded = round_size(bytes);
  void* p = nullptr;
  auto it = free_.lower_bound(rounded);
  // Reuse a cached block unless it is more than twice the request (keeps big blocks for big asks).
  if (it != free_.end() && it->first <= 2 * rounded) {
    p = it->second;
    rounded = it->first;
    cached_ -= rounded;
    free_.erase(it);
  } else {
    p = allocate_fresh(rounded);
  }
  in_use_ += rounded;
  peak_ = std::max(peak_, in_use_);
  return p;
}

void CudaBackend::deallocate(void* ptr, size_t) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto block = block_size_.find(ptr);
  if (block == block_size_.end()) {  // a pool's: it stays there until free_pool
    auto chunk = pool_chunks_.upper_bound(static_cast<char*>(ptr));
    NM_CHECK(chunk != pool_chunks_.begin() && static_cast<char*>(ptr) < std::prev(chunk)->first + std::prev(chunk)->second,
             "cuda:{}: deallocate of {} which this backend never allocated", index_, ptr);
    return;
  }
  size_t rounded = block->second;
  in_use_ -= rounded;
  cached_ += rounded;
  free_.emplace(rounded, ptr);  // stream-ordered reuse: the one stream serialises users
}

void* CudaBackend::pool_allocate(Pool& pool, size_t bytes) {
  constexpr size_t kAlign = 256, kChunk = size_t{8} << 20;
  const size_t need = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  while (pool.chunk < pool.chunks.size() && pool.offset + need > pool.chunks[pool.chunk].second)
    ++pool.chunk, pool.offset = 0;  // a later chunk (this pass asks in another order than the last)
  if (pool.chunk == pool.chunks.size()) {
    void* p = allocate_fresh(std::max(need, kChunk));
    const size_t got = block_size_.at(p);
    block_size_.erase(p);  // the pool's now, never the free lists'
    pool.chunks.emplace_back(static_cast<char*>(p), got);
    pool_chunks_[static_cast<char*>(p)] = got;
    pool.offset = 0;
    in_use_ += got;  // held for good, as far as the caching allocator's figures go
    peak_ = std::max(peak_, in_use_);
  }
  char* p = pool.chunks[pool.chunk].first + pool.offset;
  pool.offset += need;
  return p;
}

int64_t CudaBackend::make_pool() {
  std::lock_guard<std::mutex> lock(mu_);
  pools_[next_pool_] = Pool{};
  return next_pool_++;
}

void CudaBackend::activate_pool(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  NM_CHECK(id < 0 || pools_.count(id), "cuda:{}: no pool {}", index_, id);
  active_pool_ = id;
}

void CudaBackend::rewind_pool(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  Pool& pool = pools_.at(id);
  pool.chunk = 0, pool.offset = 0;
}

void CudaBackend::free_pool(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pools_.find(id);
  if (it == pools_.end()) return;
  NM_CUDA_CHECK(cudaStreamSynchronize(stream_));  // its last replay may still be running
  for (auto& [start, bytes] : it->second.chunks) {
    cudaFree(start);
    pool_chunks_.erase(start);
    in_use_ -= bytes;
  }
  if (active_pool_ == id) active_pool_ = -1;
  pools_.erase(it);
}

size_t CudaBackend::pool_bytes(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t b = 0;
  for (auto& [start, bytes] : pools_.at(id).chunks) b += bytes;
  return b;
}

void CudaBackend::release_cache() {
  for (auto& [size, p] : free_) {
    cudaFree(p);
    block_size_.erase(p);
  }
  free_.clear();
  cached_ = 0;
}

void CudaBackend::fill_zero(void* ptr, size_t bytes) { NM_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_)); }

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  NM_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  NM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  note_host_wait();
}

void CudaBackend::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  NM_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  NM_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host buffer may be freed right after
  note_host_wait();
}

void CudaBackend::copy_on_device(void* dst, const void* src, size_t bytes) {
  NM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::synchronize() {
  NM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  note_host_wait();
}

cublasHandle_t CudaBackend::cublas() {
  if (!cublas_) {
    NM_CUBLAS_CHECK(cublasCreate(&cublas_));
    NM_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  }
  return cublas_;
}

cublasLtHandle_t CudaBackend::cublaslt() {
  if (!cublaslt_) NM_CUBLAS_CHECK(cublasLtCreate(&cublaslt_));
  return cublaslt_;
}

void* CudaBackend::lt_workspace() {
  if (!lt_workspace_) NM_CUDA_CHECK(cudaMalloc(&lt_workspace_, kLtWorkspaceBytes));
  return lt_workspace_;
}

CudaBackend& cuda_backend(const Context& ctx) {
  auto* b = dynamic_cast<CudaBackend*>(ctx.backend);
  NM_CHECK(b, "a CUDA op was given a context on {}", ctx.backend->device().str());
  return *b;
}

cudaStream_t cuda_stream(const Context& ctx) { return cuda_backend(ctx).stream(); }

}  // namespace nemotron::cuda
