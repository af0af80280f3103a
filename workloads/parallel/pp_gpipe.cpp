// pp_schedule = "gpipe" (pp_schedule.h): every micro-batch's forward, then every backward, in
// micro-batch order (torch.distributed.pipelining's ScheduleGPipe). Holds all m micro-batches'
// activations at its peak.
#include "harness/workload.h"
#include "workloads/parallel/pp_schedule.h"

namespace sb::parallel {
namespace {

PpPlan gpipe(int pp, int m, int) {
  PpPlan plan(pp);
  for (auto& actions : plan) {
    for (int mb = 0; mb < m; ++mb) actions.push_back({true, mb, 0});
    for (int mb = 0; mb < m; ++mb) actions.push_back({false, mb, 0});
  }
  return plan;
}

const sb::Registrar kRegister([] {
  register_pp_schedule({"gpipe", "every forward, then every backward (GPipe)", false, false, gpipe});
});

}  // namespace
}  // namespace sb::parallel
