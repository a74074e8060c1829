#include "core/error.h"
#if NEMOTRON_CUDA
#include "parallel/nccl_communicator.h"

#include <fmt/format.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "backend/cuda/cuda_backend.h"
#include "ops/matmul_cuda.h"

namespace nemotron::parallel {

namespace {

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc == ncclSuccess) return;
  throw Error(fmt::format("NCCL {} failed: {} ({})", what, ncclGetErrorString(rc), ncclGetLastError(nullptr)));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

}  // namespace

NcclCommunicator::NcclCommunicator(std::unique_ptr<MpiCommunicator> host, cuda::CudaBackend& device)
    : host_(std::move(host)), device_(device) {
  ncclUniqueId id{};
  if (host_->rank() == 0) check_nccl(ncclGetUniqueId(&id), "get_unique_id");
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, host_->comm());
  cudaSetDevice(device_.index());
  check_nccl(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()), "comm_init_rank");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(comm_);
  if (queued_) cudaEventDestroy(static_cast<cudaEvent_t>(queued_));
  if (done_) cudaEventDestroy(static_cast<cudaEvent_t>(done_));
  if (comm_stream_) cudaStreamDestroy(static_cast<cudaStream_t>(comm_stream_));
}

void* NcclCommunicator::comm_stream_after_compute() {
  if (!comm_stream_) {
    cudaStream_t s = nullptr;
    cudaEvent_t a = nullptr, b = nullptr;
    // The highest priority: when a GEMM on the compute stream frees SMs, the collective's blocks
    // are scheduled first, so it runs beside the GEMM instead of after it.
    int least = 0, greatest = 0;
    NM_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess, "cudaDeviceGetStreamPriorityRange failed");
    NM_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest) == cudaSuccess, "cudaStreamCreate failed");
    NM_CHECK(cudaEventCreateWithFlags(&a, cudaEventDisableTiming) == cudaSuccess &&
                 cudaEventCreateWithFlags(&b, cudaEventDisableTiming) == cudaSuccess,
             "cudaEventCreate failed");
    comm_stream_ = s, queued_ = a, done_ = b;
  }
  cudaStream_t comm = static_cast<cudaStream_t>(comm_stream_);
  cudaEvent_t queued = static_cast<cudaEvent_t>(queued_);
  NM_CHECK(cudaEventRecord(queued, device_.stream()) == cudaSuccess, "cudaEventRecord failed");
  NM_CHECK(cudaStreamWaitEvent(comm, queued, 0) == cudaSuccess, "cudaStreamWaitEvent failed");
  return comm;
}

void NcclCommunicator::all_reduce_async(Tensor& t, ReduceOp op) {
  if (t.device().is_cpu()) return all_reduce(t, op);
  cudaStream_t comm = static_cast<cudaStream_t>(comm_stream_after_compute());
  check_nccl(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), nccl_op(op), comm_,
                           comm),
             "all_reduce");
  queued_async();
}

void NcclCommunicator::all_to_all_v_async(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                                          const std::vector<int64_t>& recv_counts) {
  if (in.device().is_cpu()) return all_to_all_v(in, send_counts, out, recv_counts);
  queue_all_to_all(in, send_counts, out, recv_counts, comm_stream_after_compute());
  queued_async();
}

void NcclCommunicator::reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) {
  if (in.device().is_cpu()) return reduce_scatter(in, out, op);
  check_chunked(in, out, size(), "reduce_scatter");
  cudaStream_t comm = static_cast<cudaStream_t>(comm_stream_after_compute());
  check_nccl(ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()), nccl_type(in.dtype()),
                               nccl_op(op), comm_, comm),
             "reduce_scatter");
  queued_async();
}

void NcclCommunicator::all_gather_async(const Tensor& in, Tensor& out) {
  if (in.device().is_cpu()) return all_gather(in, out);
  check_chunked(in, out, size(), "all_gather");
  cudaStream_t comm = static_cast<cudaStream_t>(comm_stream_after_compute());
  check_nccl(ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()), comm_, comm),
             "all_gather");
  queued_async();
}

void NcclCommunicator::queued_async() {
  pending_ = true;
  if (overlap_sms_ > 0) ops::set_gemm_sm_margin(overlap_sms_);
}

void NcclCommunicator::wait_pending() {
  if (!pending_) return;
  if (overlap_sms_ > 0) ops::set_gemm_sm_margin(0);
  cudaEvent_t done = static_cast<cudaEvent_t>(done_);
  NM_CHECK(cudaEventRecord(done, static_cast<cudaStream_t>(comm_stream_)) == cudaSuccess, "cudaEventRecord failed");
  NM_CHECK(cudaStreamWaitEvent(device_.stream(), done, 0) == cudaSuccess, "cudaStreamWaitEvent failed");
  pending_ = false;
}

// Host tensors in a NCCL group go through its MPI communicator.
#define NM_HOST_FALLBACK(t, call)      \
  if ((t).device().is_cpu()) {         \
    host_->call;                       \
    return;                            \
  }

void NcclCommunicator::all_reduce(Tensor& t, ReduceOp op) {
  NM_HOST_FALLBACK(t, all_reduce(t, op));
  check_nccl(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), nccl_type(t.dtype()), nccl_op(op), comm_,
                           device_.stream()),
             "all_reduce");
}

void NcclCommunicator::reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) {
  NM_HOST_FALLBACK(in, reduce_scatter(in, out, op));
  check_chunked(in, out, size(), "reduce_scatter");
  check_nccl(ncclReduceScatter(in.raw(), out.raw(), static_cast<size_t>(out.numel()), nccl_type(in.dtype()),
                               nccl_op(op), comm_, device_.stream()),
             "reduce_scatter");
}

void NcclCommunicator::all_gather(const Tensor& in, Tensor& out) {
  NM_HOST_FALLBACK(in, all_gather(in, out));
  check_chunked(in, out, size(), "all_gather");
  check_nccl(ncclAllGather(in.raw(), out.raw(), static_cast<size_t>(in.numel()), nccl_type(in.dtype()), comm_,
                           device_.stream()),
             "all_gather");
}

void NcclCommunicator::all_to_all_v(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                                    const std::vector<int64_t>& recv_counts) {
  NM_HOST_FALLBACK(in, all_to_all_v(in, send_counts, out, recv_counts));
  queue_all_to_all(in, send_counts, out, recv_counts, device_.stream());
}

void NcclCommunicator::queue_all_to_all(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                                        const std::vector<int64_t>& recv_counts, void* stream_ptr) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  check_counts(in, send_counts, out, recv_counts, size());
  const size_t es = dtype_size(in.dtype());
  const char* src = static_cast<const char*>(in.raw());
  char* dst = static_cast<char*>(out.raw());
  check_nccl(ncclGroupStart(), "group_start");
  for (int r = 0; r < size(); ++r) {
    if (send_counts[r] > 0)
      check_nccl(ncclSend(src, static_cast<size_t>(send_counts[r]) * es, ncclUint8, r, comm_, stream), "send");
    if (recv_counts[r] > 0)
      check_nccl(ncclRecv(dst, static_cast<size_t>(recv_counts[r]) * es, ncclUint8, r, comm_, stream), "recv");
    src += static_cast<size_t>(send_counts[r]) * es;
    dst += static_cast<size_t>(recv_counts[r]) * es;
  }
  check_nccl(ncclGroupEnd(), "group_end");
}

void NcclCommunicator::broadcast(Tensor& t, int root) {
  NM_HOST_FALLBACK(t, broadcast(t, root));
  check_nccl(ncclBroadcast(t.raw(), t.raw(), t.nbytes(), ncclUint8, root, comm_, device_.stream()), "broadcast");
}

#undef NM_HOST_FALLBACK

}  // namespace nemotron::parallel
#endif
