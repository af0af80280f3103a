// The measured GEMM peak MFU divides by (docs/METRICS.md "MFU"): square GEMMs of growing size
// n (256, 512, ... up to 4096 on the host, 8192 on a GPU) through a GEMM path the workloads run
// their matmuls through, timed on every rank at once (ranks of a node share cores' units and
// memory bandwidth: two vCPUs may share one core's AMX unit), until one GEMM takes more than
// stop_after_s; the peak is the best size's rate, the slowest rank's.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace sb::train {

// A GEMM path, with what it can run.
struct GemmPath {
  std::string name;  // "at::mm", "onednn_packed"
  std::string doc;
  std::function<bool(const torch::Device&, torch::ScalarType)> runs;
  // Builds the operands of an (n x n) by (n x n) product and returns the call to time.
  std::function<std::function<void()>(std::int64_t n, const torch::Device&, torch::ScalarType)> make;
};
// Every path, the one training's linears take first (at::mm: at::linear's addmm / mm).
const std::vector<GemmPath>& gemm_paths();
const GemmPath& gemm_path(const std::string& name);  // unknown: error listing the known ones

struct GemmSize {
  std::int64_t n = 0;
  int reps = 0;         // timed repetitions (after one untimed)
  double seconds = 0;   // the best repetition, the slowest rank's
  double gflops = 0;    // 2 n^3 / seconds / 1e9, the slowest rank's best
};

struct GemmSweep {
  std::int64_t first_n = 256, max_n = 4096;
  double stop_after_s = 0.3;  // no larger size once one GEMM took longer
  double reps_s = 0.3;        // timed repetitions per size: until this long, at least 2 (1 when one
                              // call takes longer), at most max_reps
  int max_reps = 30;
};
GemmSweep default_sweep(const torch::Device& d);  // max_n 4096 on the host, 8192 on a GPU

struct GemmCurve {
  std::string path;
  std::vector<GemmSize> sizes;
  const GemmSize& best() const;  // the highest rate
};

// Collective over comm (every rank calls it; MPI_COMM_NULL: this process alone): each size's
// repetitions start together after a barrier.
GemmCurve measure_gemm_curve(const GemmPath& path, const torch::Device& d, torch::ScalarType dtype,
                             const GemmSweep& sweep, MPI_Comm comm);

}  // namespace sb::train
