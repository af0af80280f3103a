// MFU (docs/METRICS.md): model FLOPs per second achieved over the peak the matmuls can reach.
// A figure above 1 says the peak is not that machine's (a wrong peak_gflops, or a GEMM timed
// while other work held the cores), so it is not a number to print: NaN, and why.
#pragma once
#include <string>

namespace sb::train {

struct Mfu {
  double value = 0;     // in [0, 1], or NaN when it cannot be
  std::string invalid;  // why it is NaN ("" when valid)
};

// flops_per_token x tokens / seconds / (peak_gflops_per_rank x 1e9 x ranks). `above`: what a
// figure above 1 means for this peak, for the reason.
Mfu model_flops_utilisation(double flops_per_token, double tokens, double seconds,
                            double peak_gflops_per_rank, int ranks,
                            const std::string& above = "the peak is not this machine's (peak_gflops "
                                                       "set too low, or its GEMM timed while other work ran)");

}  // namespace sb::train
