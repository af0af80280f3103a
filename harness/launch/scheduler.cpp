// Scheduler registry: the known schedulers by name.
#include "harness/launch/scheduler.h"

#include "harness/core/check.h"

namespace sb {

// An explicit table, like the launchers: static registration would be dropped by the linker.
std::unique_ptr<Scheduler> find_scheduler(const std::string& name) {
  if (name == "local") return make_local_scheduler();
  if (name == "slurm") return make_slurm_scheduler();
  SB_FAIL("unknown scheduler '{}'; known schedulers: local, slurm", name);
}

}  // namespace sb
