// Schedulers: how the points of a suite get run (local: one after another through a
// launcher; slurm: a job array per world size). One per file, registered by name with a record
// of what it can do (SchedulerInfo), which callers ask instead of comparing names.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sb {

struct Suite;
class Point;

struct ScheduleOptions {
  std::string results_dir;     // absolute or relative to the working directory
  std::string exe;             // the shardbench binary the ranks run ("" = this one)
  bool retry_failed = false;   // rerun points whose result says failed
  int np_max = 0;              // local: skip points with more ranks (0 = no limit)
  // local: run only these points (ids or indices; empty = all), the rest left as they are
  // (`shardbench search` runs the points it chose through here).
  std::vector<std::string> only;
  bool allow_oversubscribe = false;  // local: run points with more threads than cores
  bool dry_run = false;        // slurm: write and print the scripts, do not submit
  int max_parallel = 0;        // slurm: array tasks at once (0 = no limit)
  std::string launcher;        // override of the points' launcher ("" = the point's)
  std::string partition;       // slurm partition ("" = the cluster's default)
  int time_min = 0;            // slurm --time in minutes (0 = from the points' time_limit)
  // A cluster scheduler's one-node test cluster (jobscripts/local-cluster.sh): ranks start as
  // on a workstation (as root, oversubscribed, unbound) instead of pinned to cores.
  bool local_cluster = false;
  std::FILE* out = stdout;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::string name() const = 0;
  // Runs or submits what is missing; returns the process exit code (non-zero: a point failed).
  virtual int schedule(const Suite& suite, const ScheduleOptions& opt) const = 0;
  // What this scheduler has under way for the results folder: point index -> its state there
  // ("running", or the queue's word: "PENDING", "RUNNING", ...). `note` gets why it could not
  // tell (e.g. squeue failed). `status` asks every registered scheduler.
  virtual std::map<std::int64_t, std::string> active_points(const std::string& results_dir,
                                                             std::string* note) const = 0;
};

using SchedulerFactory = std::function<std::unique_ptr<Scheduler>()>;

// What a scheduler is and can do.
struct SchedulerInfo {
  SchedulerFactory make;
  // false: runs the points on this machine, now (`shardbench sweep`); true: hands them to a
  // cluster's batch queue (`shardbench submit`), whose states active_points reports
  // ("PENDING", "RUNNING", ...).
  bool needs_cluster = false;
  // Submits job arrays, whose tasks running at once ScheduleOptions::max_parallel caps.
  bool job_arrays = false;
  // Its jobs have a time limit of their own (ScheduleOptions::time_min), beside the points'.
  bool job_time_limit = false;
  // Its jobs go to a named partition of the cluster (ScheduleOptions::partition).
  bool partitions = false;
  // Has a one-node test cluster (ScheduleOptions::local_cluster).
  bool local_cluster = false;
  // Its jobs run inside an allocation of the cluster's, so a launcher that needs one
  // (LauncherInfo::allocation_env) may start their ranks; one that does not allocate runs
  // such a launcher only where the environment already is an allocation (salloc).
  bool allocates = false;
};

// Schedulers register by name at static-init time (one file each: local.cpp, slurm.cpp); a
// name registered twice fails at start-up.
void register_scheduler(const std::string& name, const std::string& doc, SchedulerInfo info);
std::unique_ptr<Scheduler> find_scheduler(const std::string& name);  // unknown -> lists known
const SchedulerInfo& scheduler_info(const std::string& name);        // unknown -> lists known
std::vector<std::string> scheduler_names();                          // sorted

// The scheduler `shardbench sweep` (cluster false) or `submit` (cluster true) runs: `name` when
// given, which must be of that kind, else the one registered scheduler of that kind (an error
// listing them when there are several: pass --scheduler).
std::string choose_scheduler(const std::string& name, bool cluster);

}  // namespace sb
