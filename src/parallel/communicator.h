// One communicator interface for every group and device: collectives on dense tensors, in place
// or into a caller-made output, called by every member of the group in the same order.
//  - SelfCommunicator: a group of one (one process; the size-1 path is this, not a second code
//    path: every collective is the identity or a copy).
//  - MpiCommunicator: host tensors over MPI (CPU ranks, and the bootstrap of NCCL).
//  - NcclCommunicator: device tensors over NCCL, on the compute stream (CUDA builds).
// Sizes are in elements. Reductions take float32 or float64 (MPI) and bfloat16 too (NCCL); the
// data-movement collectives take any dtype.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace nemotron::parallel {

enum class ReduceOp { sum, max, min };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string kind() const = 0;  // "self", "mpi", "nccl"

  // t = op over the group of every member's t.
  virtual void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum) = 0;
  // in: size() equal chunks along its flat elements; out (in.numel() / size() elements) = op over
  // the group of every member's chunk rank().
  virtual void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op = ReduceOp::sum) = 0;
  // out (size() x in.numel() elements) = every member's in, in rank order.
  virtual void all_gather(const Tensor& in, Tensor& out) = 0;
  // Each member sends send_counts[d] elements to member d, taken from `in` in rank order
  // (contiguously: member 0's first), and receives recv_counts[s] elements from member s, placed
  // into `out` in rank order. Counts in elements.
  virtual void all_to_all_v(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                            const std::vector<int64_t>& recv_counts) = 0;
  // t on every member = t on `root`.
  virtual void broadcast(Tensor& t, int root) = 0;
  virtual void barrier() = 0;

  // An in-place all-reduce that may overlap the compute queued after it (NCCL: on a
  // communication stream, after the compute stream's work queued so far); wait_pending() makes
  // what is queued next (the compute stream, or the host) wait for every one still pending.
  // Synchronous where there is no second queue (one process, MPI on host tensors).
  virtual void all_reduce_async(Tensor& t, ReduceOp op = ReduceOp::sum) { all_reduce(t, op); }
  // all_to_all_v in the same way: `in` and `out` must stay allocated until wait_pending().
  virtual void all_to_all_v_async(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                                  const std::vector<int64_t>& recv_counts) {
    all_to_all_v(in, send_counts, out, recv_counts);
  }
  // reduce_scatter in the same way: `in` and `out` must stay allocated until wait_pending().
  virtual void reduce_scatter_async(const Tensor& in, Tensor& out, ReduceOp op = ReduceOp::sum) {
    reduce_scatter(in, out, op);
  }
  // all_gather in the same way: `in` and `out` must stay allocated until wait_pending().
  virtual void all_gather_async(const Tensor& in, Tensor& out) { all_gather(in, out); }
  virtual void wait_pending() {}

  // Host values (loss sums, token counts, flags), whatever device the group's tensors live on.
  virtual void all_reduce_host(std::vector<double>& values, ReduceOp op = ReduceOp::sum) = 0;
  double all_reduce_host(double value, ReduceOp op = ReduceOp::sum) {
    std::vector<double> v{value};
    all_reduce_host(v, op);
    return v[0];
  }
};

// The group of one process.
class SelfCommunicator final : public Communicator {
 public:
  using Communicator::all_reduce_host;  // the one-value form
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string kind() const override { return "self"; }
  void all_reduce(Tensor&, ReduceOp) override {}
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp) override;
  void all_gather(const Tensor& in, Tensor& out) override;
  void all_to_all_v(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                    const std::vector<int64_t>& recv_counts) override;
  void broadcast(Tensor&, int root) override;
  void barrier() override {}
  void all_reduce_host(std::vector<double>&, ReduceOp) override {}
};

// `text` on every member = `text` on `root`, through host memory: for a communicator of host
// tensors (MPI, or the self group), not NCCL's device tensors. How rank 0 hands the others its
// decisions (the requests of an inference run, a server's admissions and stop).
void broadcast_text(Communicator& c, std::string& text, int root = 0);
// The reverse: on `root`, every member's `text` in rank order (its own included); elsewhere an
// empty list. One all-gather of the lengths and one exchange of the bytes, whatever the number of
// members: how the data ranks of an expert-parallel server report each step's tokens to rank 0.
std::vector<std::string> gather_text(Communicator& c, const std::string& text, int root = 0);

// Checks shared by the implementations (InputError-free: these are internal invariants).
void check_chunked(const Tensor& in, const Tensor& out, int size, const char* what);
void check_counts(const Tensor& in, const std::vector<int64_t>& send_counts, const Tensor& out,
                  const std::vector<int64_t>& recv_counts, int size);

}  // namespace nemotron::parallel
