// Collectives on device tensors over NCCL, queued on the compute stream of the rank's CUDA
// backend (so they order with the kernels around them without host waits). Host tensors and host
// values go through the same group's MPI communicator, which also bootstrapped NCCL: group rank
// 0 makes the unique id, MPI broadcasts it, every member joins with ncclCommInitRank.
// CUDA builds only (NEMOTRON_CUDA).
#pragma once
#include <memory>

#include "parallel/mpi_communicator.h"

struct ncclComm;

namespace nemotron::cuda {
class CudaBackend;
}

namespace nemotron::parallel {

class NcclCommunicator final : public Communicator {
 public:
  using Communicator::all_reduce_host;  // the one-value form
  NcclCommunicator(std::unique_ptr<MpiCommunicator> host, cuda::CudaBackend& device);
  ~NcclCommunicator() override;

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  std::string kind() const override { return "nccl"; }

  void all_reduce(Tensor& t, ReduceOp op) override;
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override;
  void all_gather(const Tensor& in, Tensor& out) override;
  void all_to_all_v(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                    const std::vector<int64_t>& recv_counts) override;
  void broadcast(Tensor& t, int root) override;
  void barrier() override { host_->barrier(); }
  void all_reduce_async(Tensor& t, ReduceOp op) override;
  void all_to_all_v_async(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                          const std::vector<int64_t>& recv_counts) override;
  void reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op) override;
  void all_gather_async(const Tensor& in, Tensor& out) override;
  void wait_pending() override;
  // While an async collective of this group is pending, GEMMs leave `sms` multiprocessors to it
  // (ops::set_gemm_sm_margin); 0 (the default): no margin.
  void set_overlap_sm_margin(int sms) { overlap_sms_ = sms; }
  void all_reduce_host(std::vector<double>& values, ReduceOp op) override { host_->all_reduce_host(values, op); }

 private:
  std::unique_ptr<MpiCommunicator> host_;
  cuda::CudaBackend& device_;
  ncclComm* comm_ = nullptr;
  // The communication stream of the async collectives, and the events that order it with the compute
  // stream (created on first use).
  void* comm_stream_ = nullptr;
  void* queued_ = nullptr;  // recorded on the compute stream before each async collective
  void* done_ = nullptr;    // recorded on the communication stream by wait_pending
  bool pending_ = false;
  int overlap_sms_ = 0;
  // Marks an async collective queued: pending, and the GEMMs' margin while it is.
  void queued_async();
  // The communication stream, after the compute stream's work queued so far (created on first use).
  void* comm_stream_after_compute();
  // The send/recv pairs of all_to_all_v on `stream`.
  void queue_all_to_all(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                        const std::vector<int64_t>& recv_counts, void* stream);
};

}  // namespace nemotron::parallel
