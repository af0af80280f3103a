// The ISA's theoretical peak of one rank, as Megatron and PaLM report MFU against a hardware
// peak: cores x clock x FLOP per cycle per core of the fastest units the CPU has for the dtype
// (docs/METRICS.md "MFU"). Read from the machine facts the harness records (ISA flags, vendor,
// clock, cores); when one of them is unknown (a VM without cpufreq hides the clock) there is
// no figure and `unknown` says which.
#pragma once
#include <string>

#include <torch/types.h>

#include "harness/core/machine.h"

namespace sb::train {

struct IsaPeak {
  double gflops = 0;        // per rank; NaN when unknown
  double flops_per_cycle = 0;  // per core
  std::string units;        // "AMX-BF16", "AVX-512 FMA", ...
  std::string basis;        // "2 cores x 3.80 GHz (cpufreq ...) x 1024 FLOP/cycle (AMX-BF16)"
  std::string unknown;      // why there is no figure ("" when there is)
};

// FLOP per cycle per core for dtype on this CPU (0, with `units` = why, when no rule applies).
// Dense FMAs count 2 FLOPs; the figures assume the vector units of the ISA's generation (two
// FMA units; AMD before family 26 (Zen 5) runs 512-bit operations on 256-bit datapaths).
IsaPeak isa_flops_per_cycle(const sb::MachineInfo& m, torch::ScalarType dtype);

// cores = the physical cores this rank computes on (its threads, at most its share of the
// node's physical cores).
IsaPeak isa_peak(const sb::MachineInfo& m, torch::ScalarType dtype, double cores);

}  // namespace sb::train
