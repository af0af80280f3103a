// The Slurm scheduler's own interface beside the generic Scheduler (scheduler.h): where the
// job scripts run, and how a launcher pins ranks there. `shardbench submit` reaches it through
// the scheduler registry (the "slurm" scheduler's schedule()).
#pragma once
#include <string>
#include <vector>

#include "harness/launch/launcher.h"
#include "harness/launch/scheduler.h"

namespace sb {

struct Suite;

struct SlurmSite {
  // The one-node cluster of jobscripts/local-cluster.sh (`submit --local-cluster`): ranks
  // start as on a workstation (as root, more ranks than cores, unbound) and threads = 0 asks
  // for one CPU per task. Otherwise a real cluster: never those flags, --cpus-per-task is the
  // points' threads (which must then be set) and each rank is pinned to that many cores.
  bool local_cluster = false;
};

// Submits (or with opt.dry_run only writes and prints) the job arrays of the points that still
// need to run: one per world size and thread count. Returns the exit code. The scheduler's
// schedule() calls it with site.local_cluster = opt.local_cluster.
int submit_suite(const Suite& suite, const ScheduleOptions& opt, const SlurmSite& site);

// Implemented beside Launcher by the launchers a real cluster's job script may use
// (mpirun.cpp, srun.cpp): Launcher::prefix stays what a workstation needs.
class PinningLauncher {
 public:
  virtual ~PinningLauncher() = default;
  // argv prefix that starts spec.world ranks, each bound to spec.threads cores of the
  // allocation; no flag for running as root, oversubscribing or leaving ranks unbound.
  virtual std::vector<std::string> pinned_prefix(const LaunchSpec& spec) const = 0;
};

// The launcher argv of a job script: the launcher's prefix on the local cluster, its pinned
// prefix on a real one (an error naming the launchers that can pin when this one cannot).
std::vector<std::string> job_launch_prefix(const std::string& launcher, const LaunchSpec& spec,
                                           const SlurmSite& site);

}  // namespace sb
