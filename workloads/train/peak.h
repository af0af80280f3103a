// What a training run's MFU divides by (docs/METRICS.md "MFU"): the measured GEMM peak in the
// dtype the matmuls run in (gemm_peak.h: growing sizes, every rank of the node at once; cached
// per machine, peak_cache.h), the fp32 one beside it, and the ISA's theoretical peak
// (isa_peak.h). A dtype the device has no units for has no peak: MFU then has no number and
// says why, rather than dividing by another dtype's peak.
#pragma once
#include <mpi.h>

#include <string>

#include <torch/types.h>

#include "workloads/train/gemm_peak.h"
#include "workloads/train/isa_peak.h"

namespace sb::train {

struct MeasuredPeak {
  std::string dtype;   // "bf16", "fp32", ...
  double gflops = 0;   // per rank; NaN when there is none
  std::int64_t n = 0;  // the size that won
  GemmCurve curve;     // every size measured
  std::string source;  // "measured on 2 ranks at once (cached in FILE)", "cache FILE, measured ..."
  std::string none;    // why there is no peak ("" when there is)
};

struct Peaks {
  MeasuredPeak compute, fp32;  // compute: the dtype the matmuls run in (fp32 runs: the same)
  IsaPeak isa;                 // theoretical, compute dtype
  double divisor = 0;          // MFU's denominator per rank: peak_gflops when given, else compute's
  std::string divisor_name;    // "given (peak_gflops)" or the compute dtype
  std::string no_mfu;          // why MFU has no number ("" when it has)
};

// Collective over world. given_gflops > 0 (the peak_gflops key) replaces the measured divisor
// and skips the measurements.
Peaks training_peaks(const torch::Device& d, torch::ScalarType compute, double given_gflops, MPI_Comm world);

}  // namespace sb::train
