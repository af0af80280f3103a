// Schedulers: how the points of a suite get run (local: one after another through a
// launcher; slurm: a job array per world size). One per file, chosen by name.
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
  bool allow_oversubscribe = false;  // local: run points with more threads than cores
  bool dry_run = false;        // slurm: write and print the scripts, do not submit
  int max_parallel = 0;        // slurm: array tasks at once (0 = no limit)
  std::string launcher;        // override of the points' launcher ("" = the point's)
  std::string partition;       // slurm partition ("" = the cluster's default)
  int time_min = 0;            // slurm --time in minutes (0 = from the points' time_limit)
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

// Schedulers register by name at static-init time (one file each: local.cpp, slurm.cpp).
using SchedulerFactory = std::function<std::unique_ptr<Scheduler>()>;
void register_scheduler(const std::string& name, SchedulerFactory make);
std::unique_ptr<Scheduler> find_scheduler(const std::string& name);  // unknown -> lists known
std::vector<std::string> scheduler_names();

}  // namespace sb
