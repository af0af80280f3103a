// What every micro point records per swept size, however it ran (the in-process cases of
// micro_workload.cpp or the Python twin, python_twin.h): the sizes, each size's timed calls,
// and its step and series, so both write the same series from one place.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/micro/micro_config.h"
#include "workloads/micro/p2p_case.h"

namespace sb {
class Recorder;
}

namespace sb::micro {

// The swept sizes: micro.min_bytes x micro.factor^k up to micro.max_bytes.
std::vector<std::int64_t> swept_sizes(const MicroConfig& mc);
// Timed calls at a size: micro.iters, or by size (default_iterations) when 0.
int timed_iterations(const MicroConfig& mc, std::int64_t bytes);

// One size's figures: the slowest rank's mean call or iteration, min and max over the ranks'
// means, and the elements received wrong.
struct SizeFigures {
  std::int64_t step = 0, size_bytes = 0, wire_bytes = 0;
  double mean_s = 0, rank_min_s = 0, rank_max_s = 0;
  std::int64_t wrong = 0;
};
// The step (wall_s = mean_s) and the series of a collective (algbw, busbw over `ranks`) or of
// a point-to-point benchmark (message_us, bandwidth_MBps; p2p_case.h's formulas).
void record_collective_size(Recorder& rec, const SizeFigures& f, const std::string& op, int ranks);
void record_p2p_size(Recorder& rec, const SizeFigures& f, P2PBench bench, int window);

}  // namespace sb::micro
