// Per-layer statistics of expert parallelism reduced over the ranks, one rule for training's
// and inference's series (docs/METRICS.md "MoE", "Expert-parallel inference"): counts and
// bytes are added over the ranks, seconds are the slowest rank's.
#pragma once
#include <mpi.h>

#include <vector>

namespace sb::parallel {

// sums: any number of values a layer, each summed over comm's ranks; slowest: one or more a
// layer, each the maximum over the ranks. In place; collective over comm (every rank passes
// vectors of the same sizes).
void reduce_layer_stats(std::vector<double>& sums, std::vector<double>& slowest, MPI_Comm comm);

}  // namespace sb::parallel
