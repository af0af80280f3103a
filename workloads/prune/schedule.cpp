// Pruning schedules (schedule.h).
#include "workloads/prune/schedule.h"

#include <cmath>

#include "harness/core/check.h"

namespace sb::prune {

double scheduled_sparsity(const Schedule& s, std::int64_t t) {
  if (s.kind == "oneshot") return t == s.begin ? s.sparsity : -1.0;
  SB_CHECK(s.kind == "cubic", "pruning.schedule '{}': use cubic or oneshot", s.kind);
  SB_CHECK(s.every >= 1 && s.end >= s.begin, "pruning schedule: every {} must be >= 1 and the end step {} "
           "not before the begin step {}", s.every, s.end, s.begin);
  if (t < s.begin || t > s.end) return -1.0;
  if (t != s.end && (t - s.begin) % s.every != 0) return -1.0;
  if (s.end == s.begin) return s.sparsity;
  const double x = 1.0 - static_cast<double>(t - s.begin) / static_cast<double>(s.end - s.begin);
  return s.sparsity * (1.0 - x * x * x);
}

}  // namespace sb::prune
