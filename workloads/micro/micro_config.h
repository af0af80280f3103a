// The micro task's keys (micro.*: a collective swept over message sizes), typed
// (harness/spec/config.h); declared in micro_workload.cpp with their plan-time rules.
#pragma once
#include <cstdint>
#include <string>

#include "harness/spec/config.h"

namespace sb::micro {

struct MicroConfig {
  std::string op;                // the collective or p2p benchmark (registered set "micro_op")
  std::string impl;              // mpi, ours, ours-async, a compressor, or tune
  std::int64_t min_bytes = 0, max_bytes = 0, factor = 0;  // the sizes: min_bytes * factor^k
  std::int64_t iters = 0;        // timed calls per size; 0 = by size
  std::int64_t warmup = 0;       // untimed calls per size
  std::int64_t block = 0;        // int8 compressor block
  double ratio = 0;              // topk compressor ratio
  std::int64_t window = 0;       // p2p_bw / p2p_bibw: messages per iteration
  static void declare(Fields<MicroConfig>& f);
};

}  // namespace sb::micro
