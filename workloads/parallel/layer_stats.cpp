#include "workloads/parallel/layer_stats.h"

#include "harness/core/mpi_context.h"

namespace sb::parallel {

void reduce_layer_stats(std::vector<double>& sums, std::vector<double>& slowest, MPI_Comm comm) {
  sb::check_mpi(MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE, MPI_SUM, comm),
                "MPI_Allreduce (per-layer counts)");
  sb::check_mpi(MPI_Allreduce(MPI_IN_PLACE, slowest.data(), static_cast<int>(slowest.size()), MPI_DOUBLE, MPI_MAX,
                              comm), "MPI_Allreduce (per-layer seconds)");
}

}  // namespace sb::parallel
