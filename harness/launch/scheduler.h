// Schedulers: how the points of a suite get run (local: one after another through a
// launcher; slurm: a job array per world size). One per file, chosen by name.
#pragma once
#include <cstdio>
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
};

std::unique_ptr<Scheduler> make_local_scheduler();
std::unique_ptr<Scheduler> make_slurm_scheduler();
std::unique_ptr<Scheduler> find_scheduler(const std::string& name);  // unknown -> lists known

}  // namespace sb
