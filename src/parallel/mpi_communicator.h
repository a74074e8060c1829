// Collectives on host tensors over MPI (Open MPI from Debian; mpirun or srun --mpi=pmix starts the
// ranks). MpiRuntime initialises MPI once per process when a launcher started it; the world and
// every sub-group are MpiCommunicators over communicators split from MPI_COMM_WORLD.
#pragma once
#include <mpi.h>

#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace nemotron::parallel {

class MpiRuntime {
 public:
  // MPI_Init_thread (funneled: only the main thread calls MPI). Finalised by the destructor.
  MpiRuntime();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;
  int world_rank() const { return rank_; }
  int world_size() const { return size_; }

 private:
  int rank_ = 0, size_ = 1;
};

class MpiCommunicator final : public Communicator {
 public:
  using Communicator::all_reduce_host;  // the one-value form
  // Takes ownership of `comm` (freed by the destructor) unless it is MPI_COMM_WORLD.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;
  // The sub-group of the world ranks `members` (this process must be one of them). Collective
  // over this communicator: every member calls it, each with its own group's list.
  std::unique_ptr<MpiCommunicator> split(const std::vector<int>& members) const;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string kind() const override { return "mpi"; }
  MPI_Comm comm() const { return comm_; }

  void all_reduce(Tensor& t, ReduceOp op) override;
  void reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) override;
  void all_gather(const Tensor& in, Tensor& out) override;
  void all_to_all_v(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                    const std::vector<int64_t>& recv_counts) override;
  void broadcast(Tensor& t, int root) override;
  void barrier() override;
  void all_reduce_host(std::vector<double>& values, ReduceOp op) override;

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace nemotron::parallel
