// `shardbench submit SUITE`: the points that still need to run, as Slurm job arrays (one per
// world size and thread count); --dry-run writes and prints the scripts without submitting them.
// The suite's [slurm] table says how to ask the cluster (account, partition, ...);
// --local-cluster is for the one-node cluster of jobscripts/local-cluster.sh only.
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/launch/results.h"
#include "harness/launch/scheduler.h"
#include "harness/launch/slurm.h"
#include "harness/spec/suite.h"

namespace sb::cli {
namespace {
struct SubmitArgs {
  std::string suite, results, launcher, partition;
  bool dry_run = false, retry_failed = false, local_cluster = false;
  int max_parallel = 0, time_min = 0;
};

const bool registered = [] {
  register_command(
      {"submit", "submit the points that still need to run as Slurm job arrays",
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
         sub.add_flag("--local-cluster", a->local_cluster,
                      "for jobscripts/local-cluster.sh: ranks run as root, oversubscribed and "
                      "unbound (never on a real cluster, where they are pinned to cores)");
         sub.callback([a] {
           const Suite suite = load_suite(a->suite);
           ScheduleOptions opt;
           opt.results_dir = a->results.empty() ? default_results_dir(suite) : a->results;
           opt.dry_run = a->dry_run;
           opt.retry_failed = a->retry_failed;
           opt.max_parallel = a->max_parallel;
           opt.launcher = a->launcher;
           opt.partition = a->partition;
           opt.time_min = a->time_min;
           SlurmSite site;
           site.local_cluster = a->local_cluster;
           const int code = submit_suite(suite, opt, site);
           if (code != 0) throw Exit{code};
         });
       }});
  return true;
}();
}  // namespace
}  // namespace sb::cli
