// pp_schedule = "interleaved_1f1b" (pp_schedule.h): Megatron-LM's interleaved schedule. Each
// rank holds v model chunks (virtual stage c * pp + r), so a micro-batch crosses every rank v
// times and the bubble shrinks to (p - 1) / (v m + p - 1) at v times the point-to-point
// messages. Forwards run in groups of pp micro-batches per chunk (chunk of the k-th forward:
// (k / pp) % v, its micro-batch (k / (pp v)) pp + k % pp); backwards the same with the
// chunks reversed. Warm-up: (pp - r - 1) * 2 + (v - 1) * pp forwards (capped at m v), then
// one forward one backward, then the remaining backwards. Needs m % pp == 0.
#include <algorithm>

#include "harness/workload.h"
#include "workloads/parallel/pp_schedule.h"

namespace sb::parallel {
namespace {

PpAction nth(int k, int pp, int v, bool forward) {
  const int group = k / pp;
  const int chunk = forward ? group % v : v - 1 - group % v;
  return {forward, (k / (pp * v)) * pp + k % pp, chunk};
}

PpPlan interleaved(int pp, int m, int v) {
  PpPlan plan(pp);
  const int total = m * v;
  for (int r = 0; r < pp; ++r) {
    auto& a = plan[r];
    const int warmup = std::min((pp - r - 1) * 2 + (v - 1) * pp, total);
    for (int k = 0; k < warmup; ++k) a.push_back(nth(k, pp, v, true));
    for (int i = 0; i < total - warmup; ++i) {
      a.push_back(nth(warmup + i, pp, v, true));
      a.push_back(nth(i, pp, v, false));
    }
    for (int k = total - warmup; k < total; ++k) a.push_back(nth(k, pp, v, false));
  }
  return plan;
}

const sb::Registrar kRegister([] {
  register_pp_schedule({"interleaved_1f1b",
                        "1f1b over v virtual stages per rank (Megatron-LM's interleaved schedule)",
                        true, true, interleaved});
});

}  // namespace
}  // namespace sb::parallel
