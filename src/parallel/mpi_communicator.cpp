#include "parallel/mpi_communicator.h"

#include <fmt/format.h>

#include <limits>

#include "core/error.h"

namespace nemotron::parallel {

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw Error(fmt::format("MPI {} failed: {}", what, std::string(msg, static_cast<size_t>(len))));
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

// Reductions need a numeric MPI type; data movement goes as bytes.
MPI_Datatype reduce_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    default: break;
  }
  NM_CHECK(false, "MPI reductions take float32, float64, int32 or int64, not {} (reduce in float32)",
           dtype_name(t));
  return MPI_BYTE;
}

int as_count(int64_t n) {
  NM_CHECK(n >= 0 && n <= std::numeric_limits<int>::max(), "MPI count {} exceeds int", n);
  return static_cast<int>(n);
}

void check_host(const Tensor& t, const char* what) {
  NM_CHECK(t.device().is_cpu(), "MPI {} of a tensor on {} (device tensors go through NCCL)", what, t.device().str());
}

}  // namespace

MpiRuntime::MpiRuntime() {
  int provided = 0;
  // Serialized: one thread at a time, not always the main one (a tensor-parallel server's engine
  // thread makes rank 0's collectives while its main thread serves HTTP).
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init");
  // Errors come back as return codes so they become exceptions naming the call.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(const std::vector<int>& members) const {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int color = -1, key = -1;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i] == world_rank) key = static_cast<int>(i);
  NM_CHECK(key >= 0, "rank {} is not in its own group", world_rank);
  color = members.front();  // groups are disjoint: their first member names them
  MPI_Comm sub = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color, key, &sub), "comm_split");
  MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
  return std::make_unique<MpiCommunicator>(sub);
}

void MpiCommunicator::all_reduce(Tensor& t, ReduceOp op) {
  check_host(t, "all_reduce");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, t.raw(), as_count(t.numel()), reduce_type(t.dtype()), mpi_op(op), comm_),
            "all_reduce");
}

void MpiCommunicator::reduce_scatter(const Tensor& in, Tensor& out, ReduceOp op) {
  check_host(in, "reduce_scatter");
  check_chunked(in, out, size_, "reduce_scatter");
  check_mpi(MPI_Reduce_scatter_block(in.raw(), out.raw(), as_count(out.numel()), reduce_type(in.dtype()), mpi_op(op),
                                     comm_),
            "reduce_scatter");
}

void MpiCommunicator::all_gather(const Tensor& in, Tensor& out) {
  check_host(in, "all_gather");
  check_chunked(in, out, size_, "all_gather");
  const int bytes = as_count(static_cast<int64_t>(in.nbytes()));
  check_mpi(MPI_Allgather(in.raw(), bytes, MPI_BYTE, out.raw(), bytes, MPI_BYTE, comm_), "all_gather");
}

void MpiCommunicator::all_to_all_v(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                                   const std::vector<int64_t>& recv_counts) {
  check_host(in, "all_to_all_v");
  check_counts(in, send_counts, out, recv_counts, size_);
  const int64_t es = static_cast<int64_t>(dtype_size(in.dtype()));
  std::vector<int> sc(size_), sd(size_), rc(size_), rd(size_);
  int64_t so = 0, ro = 0;
  for (int r = 0; r < size_; ++r) {
    sc[r] = as_count(send_counts[r] * es), sd[r] = as_count(so * es);
    rc[r] = as_count(recv_counts[r] * es), rd[r] = as_count(ro * es);
    so += send_counts[r], ro += recv_counts[r];
  }
  check_mpi(MPI_Alltoallv(in.raw(), sc.data(), sd.data(), MPI_BYTE, out.raw(), rc.data(), rd.data(), MPI_BYTE, comm_),
            "all_to_all_v");
}

void MpiCommunicator::broadcast(Tensor& t, int root) {
  check_host(t, "broadcast");
  check_mpi(MPI_Bcast(t.raw(), as_count(static_cast<int64_t>(t.nbytes())), MPI_BYTE, root, comm_), "broadcast");
}

void MpiCommunicator::barrier() { check_mpi(MPI_Barrier(comm_), "barrier"); }

void MpiCommunicator::all_reduce_host(std::vector<double>& values, ReduceOp op) {
  if (values.empty()) return;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, values.data(), as_count(static_cast<int64_t>(values.size())), MPI_DOUBLE,
                          mpi_op(op), comm_),
            "all_reduce");
}

}  // namespace nemotron::parallel
