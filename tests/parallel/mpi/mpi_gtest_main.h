// The main() of the gtest binaries run under mpirun (tests/CMakeLists.txt: -np 2 and -np 4): MPI
// initialised for the whole run, gtest's report printed by rank 0 only, and the job failed when
// any rank failed (every rank's failures still print).
#pragma once
#include <gtest/gtest.h>

#include "parallel/mpi_communicator.h"

namespace nemotron::testing {

inline int run_mpi_gtests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  parallel::MpiRuntime mpi;
  if (mpi.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int rc = RUN_ALL_TESTS(), any = 0;
  MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any != 0 ? 1 : 0;
}

}  // namespace nemotron::testing
