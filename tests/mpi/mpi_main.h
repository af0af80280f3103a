// main() for MPI gtest programs: MPI_Init_thread(MPI_THREAD_MULTIPLE) (the communicator's
// thread needs it), progress output from rank 0 only, and no hangs: exceptions are not caught
// by gtest, so one rank's throw reaches here and MPI_Abort ends every rank with its message.
// Tests must not return early (ASSERT_*) before a collective the other ranks will enter.
#pragma once
#include <cstdio>
#include <exception>

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include "harness/core/check.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  sb::set_rank_identity(rank, host);
  ::testing::InitGoogleTest(&argc, argv);
  GTEST_FLAG_SET(catch_exceptions, false);
  if (rank != 0) {  // failures still print on every rank (they name the rank via SB_CHECK)
    auto& l = ::testing::UnitTest::GetInstance()->listeners();
    l.Release(l.default_result_printer());
  }
  int rc = 0;
  try {
    rc = RUN_ALL_TESTS();
    if (rc != 0) std::fprintf(stderr, "[rank %d] some tests failed on this rank\n", rank);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] uncaught exception, aborting all ranks: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
