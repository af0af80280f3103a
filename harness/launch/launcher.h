// Launchers: how the ranks of one point start (mpirun, srun). One per file, registered by name
// with a record of what it needs (LauncherInfo), chosen by the point's `launcher` key or
// `submit --launcher`. A launcher only builds an argv prefix; schedulers (local, slurm) decide
// when and where it runs.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace sb {

struct LaunchSpec {
  int world = 1;         // ranks
  int threads = 1;       // threads per rank (OMP_NUM_THREADS, cpus per task)
  bool as_root = false;  // running as root (Open MPI refuses without a flag)
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::string name() const = 0;
  // argv that, followed by a program and its arguments, starts spec.world ranks of it.
  virtual std::vector<std::string> prefix(const LaunchSpec& spec) const = 0;
};

class Point;
// World size and threads of a point (threads 0 = this machine's cores shared by the ranks).
LaunchSpec launch_spec_for(const Point& p);
struct Suite;
// One line per point of `suite` whose ranks x threads exceed `cores` when all its ranks
// share one node (the local scheduler): "point 3 (name): 4 ranks x 2 threads = ...".
// Points with more ranks than np_max (> 0) are left out: the sweep skips them.
std::vector<std::string> oversubscribed_points(const Suite& suite, int cores, int np_max = 0);

using LauncherFactory = std::unique_ptr<Launcher> (*)();

// What a launcher is and needs; callers ask it instead of comparing names.
struct LauncherInfo {
  LauncherFactory make = nullptr;
  // The flag it needs to start ranks as root ("" = none): its prefix adds it on a workstation
  // and the one-node cluster, never in a real cluster's job script (Open MPI's
  // --allow-run-as-root), so `submit` warns a root user.
  std::string root_flag;
  // The environment variable set inside the allocation it needs to start ranks ("" = none:
  // it starts them anywhere). srun starts ranks only inside a Slurm allocation (SLURM_JOB_ID);
  // a scheduler whose record says it allocates (SchedulerInfo::allocates) provides one.
  std::string allocation_env;
};

// Launchers register by name at static-init time (one file each: mpirun.cpp, srun.cpp); the
// name also joins the "launcher" name set the `launcher` key is checked against. A name
// registered twice fails at start-up.
void register_launcher(const std::string& name, const std::string& doc, LauncherInfo info);

// By name; an unknown name throws sb::Error listing the known ones.
std::unique_ptr<Launcher> find_launcher(const std::string& name);
const LauncherInfo& launcher_info(const std::string& name);
// Why `launcher` cannot start ranks here under a scheduler that does (scheduler_allocates) or
// does not run its jobs inside an allocation, with the fix; "" when it can.
std::string allocation_problem(const std::string& launcher, bool scheduler_allocates);
std::vector<std::string> launcher_names();  // sorted

}  // namespace sb
