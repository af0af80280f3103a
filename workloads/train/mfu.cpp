// MFU with its validity (mfu.h).
#include "workloads/train/mfu.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace sb::train {

Mfu model_flops_utilisation(double flops_per_token, double tokens, double seconds,
                            double peak_gflops_per_rank, int ranks, const std::string& above) {
  Mfu m;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (!(seconds > 0) || !(peak_gflops_per_rank > 0) || ranks < 1) {
    m.value = nan;
    m.invalid = fmt::format("no MFU: step time {} s, peak {} GFLOP/s per rank, {} ranks", seconds,
                            peak_gflops_per_rank, ranks);
    return m;
  }
  const double achieved = flops_per_token * tokens / seconds / 1e9 / ranks;  // GFLOP/s per rank
  m.value = achieved / peak_gflops_per_rank;
  if (m.value > 1.0) {
    m.invalid = fmt::format("no MFU: the step achieved {:.1f} model GFLOP/s per rank, above the "
                            "peak it would divide by ({:.1f}); {}", achieved, peak_gflops_per_rank, above);
    m.value = nan;
  }
  return m;
}

}  // namespace sb::train
