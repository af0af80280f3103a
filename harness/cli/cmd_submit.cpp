// `shardbench submit SUITE`: the points that still need to run, handed to the registered
// scheduler that queues them on a cluster (slurm: job arrays, one per world size and thread
// count; --scheduler names another); --dry-run writes and prints the scripts without
// submitting them. The suite's [slurm] table says how to ask the cluster (account, partition,
// ...); --local-cluster is for the one-node cluster of jobscripts/local-cluster.sh only. A flag
// the scheduler's record says it cannot honour is refused, naming the scheduler.
#include <memory>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/core/check.h"
#include "harness/launch/results.h"
#include "harness/launch/scheduler.h"
#include "harness/spec/suite.h"

namespace sb::cli {
namespace {
struct SubmitArgs {
  std::string suite, results, launcher, partition, scheduler;
  bool dry_run = false, retry_failed = false, local_cluster = false;
  int max_parallel = 0, time_min = 0;
};

// The flags that ask for something the scheduler's record says it cannot do.
void refuse_unsupported(const std::string& scheduler, const SubmitArgs& a) {
  const SchedulerInfo& i = scheduler_info(scheduler);
  const std::vector<std::pair<bool, const char*>> asks = {
      {a.max_parallel > 0 && !i.job_arrays, "--max-parallel (it submits no job arrays)"},
      {a.time_min > 0 && !i.job_time_limit, "--time-min (its jobs have no time limit)"},
      {!a.partition.empty() && !i.partitions, "--partition (it has no partitions)"},
      {a.local_cluster && !i.local_cluster, "--local-cluster (it has no one-node test cluster)"}};
  for (const auto& [unsupported, flag] : asks)
    if (unsupported) SB_FAIL("scheduler '{}' cannot honour {}; leave the flag out", scheduler, flag);
}

const bool registered = [] {
  register_command(
      {"submit", "hand the points that still need to run to a cluster's queue (slurm: job "
                  "arrays)",
       [](CLI::App& sub) {
         auto a = std::make_shared<SubmitArgs>();
         sub.add_option("suite", a->suite, "suite file")->required();
         sub.add_option("--results", a->results, "results folder (default results/<suite name>)");
         sub.add_flag("--dry-run", a->dry_run, "write and print the job scripts, do not submit");
         sub.add_flag("--retry-failed", a->retry_failed, "resubmit points recorded as failed");
         sub.add_option("--max-parallel", a->max_parallel, "array tasks running at once (%K)");
         sub.add_option("--launcher", a->launcher, "srun or mpirun (default: the points' launcher)");
         sub.add_option("--partition", a->partition,
                        "Slurm partition (default: [slurm] partition, else the cluster's)");
         sub.add_option("--time-min", a->time_min,
                        "job time limit in minutes (default: [slurm] time, else from the points' "
                        "time_limit)");
         sub.add_option("--scheduler", a->scheduler,
                        "a scheduler that queues points on a cluster (default: the one "
                        "registered)");
         sub.add_flag("--local-cluster", a->local_cluster,
                      "for jobscripts/local-cluster.sh: ranks run as root, oversubscribed and "
                      "unbound (never on a real cluster, where they are pinned to cores)");
         sub.callback([a] {
           const std::string scheduler = choose_scheduler(a->scheduler, /*cluster=*/true);
           refuse_unsupported(scheduler, *a);
           const Suite suite = load_suite(a->suite);
           ScheduleOptions opt;
           opt.results_dir = a->results.empty() ? default_results_dir(suite) : a->results;
           opt.dry_run = a->dry_run;
           opt.retry_failed = a->retry_failed;
           opt.max_parallel = a->max_parallel;
           opt.launcher = a->launcher;
           opt.partition = a->partition;
           opt.time_min = a->time_min;
           opt.local_cluster = a->local_cluster;
           const int code = find_scheduler(scheduler)->schedule(suite, opt);
           if (code != 0) throw Exit{code};
         });
       }});
  return true;
}();
}  // namespace
}  // namespace sb::cli
