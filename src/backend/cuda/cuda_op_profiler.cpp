#include "backend/cuda/cuda_op_profiler.h"

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"

namespace nemotron::cuda {

double OpPhaseTimes::total_ms() const {
  double t = 0;
  for (double m : ms) t += m;
  return t;
}

CudaOpProfiler::~CudaOpProfiler() {
  for (cudaEvent_t e : pool_) cudaEventDestroy(e);
}

void CudaOpProfiler::begin(Context& ctx, OpPhase phase, const char* op) {
  if (error_ != cudaSuccess) return;
  stream_ = cuda_stream(ctx);
  while (pool_.size() < used_ + 2) {  // both events now: end() must not throw
    cudaEvent_t e = nullptr;
    NM_CUDA_CHECK(cudaEventCreate(&e));
    pool_.push_back(e);
  }
  if ((error_ = cudaEventRecord(pool_[used_], stream_)) != cudaSuccess) return;
  ++used_;
  phases_.push_back(phase);
  names_.push_back(op);
}

void CudaOpProfiler::end(Context&) {
  if (error_ != cudaSuccess) return;
  error_ = cudaEventRecord(pool_[used_++], stream_);
}

OpPhaseTimes CudaOpProfiler::collect() {
  NM_CHECK(open_scopes == 0, "CudaOpProfiler::collect inside an op scope");
  OpPhaseTimes t;
  t.gemm_flops = gemm_flops;
  const cudaError_t err = error_;
  const size_t scopes = phases_.size();
  error_ = cudaSuccess;
  gemm_flops = 0;
  if (err == cudaSuccess && scopes > 0) {
    NM_CUDA_CHECK(cudaEventSynchronize(pool_[2 * scopes - 1]));
    for (size_t i = 0; i < scopes; ++i) {
      float ms = 0;
      NM_CUDA_CHECK(cudaEventElapsedTime(&ms, pool_[2 * i], pool_[2 * i + 1]));
      const auto p = static_cast<size_t>(phases_[i]);
      t.ms[p] += ms;
      ++t.calls[p];
      OpPhaseTimes::Op& o = t.ops[names_[i]];
      o.phase = phases_[i], o.ms += ms, ++o.calls;
      if (i == 0) continue;
      float gap = 0;
      NM_CUDA_CHECK(cudaEventElapsedTime(&gap, pool_[2 * i - 1], pool_[2 * i]));
      t.gap_before_ms[names_[i]] += gap;
    }
  }
  used_ = 0;
  phases_.clear();
  names_.clear();
  NM_CUDA_CHECK(err);
  return t;
}

}  // namespace nemotron::cuda
