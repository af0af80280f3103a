// pp_schedule = "1f1b" (pp_schedule.h): PipeDream-flush as Megatron-LM runs it. Rank r first
// forwards min(pp - r - 1, m) micro-batches (the warm-up that fills the pipe below it), then
// alternates one forward and one backward, then runs the backwards left: the same bubble as
// GPipe, but at most pp - r micro-batches' activations held at once instead of m.
#include <algorithm>

#include "harness/workload.h"
#include "workloads/parallel/pp_schedule.h"

namespace sb::parallel {
namespace {

PpPlan one_f_one_b(int pp, int m, int) {
  PpPlan plan(pp);
  for (int r = 0; r < pp; ++r) {
    auto& a = plan[r];
    const int warmup = std::min(pp - r - 1, m);
    for (int mb = 0; mb < warmup; ++mb) a.push_back({true, mb, 0});
    for (int i = 0; i < m - warmup; ++i) {
      a.push_back({true, warmup + i, 0});
      a.push_back({false, i, 0});
    }
    for (int mb = m - warmup; mb < m; ++mb) a.push_back({false, mb, 0});
  }
  return plan;
}

const sb::Registrar kRegister([] {
  register_pp_schedule({"1f1b", "warm-up forwards, then one forward one backward (PipeDream-flush)",
                        false, false, one_f_one_b});
});

}  // namespace
}  // namespace sb::parallel
