// Scheduler "slurm" (`shardbench submit`): one sbatch job array per world size and thread
// count; array task i runs point i through the chosen launcher. Done points, and points Slurm
// still has queued or running from an earlier submission, are not submitted again.
#include "harness/launch/slurm.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/core/check.h"
#include "harness/core/subprocess.h"
#include "harness/launch/jobscript.h"
#include "harness/launch/launcher.h"
#include "harness/launch/results.h"
#include "harness/launch/scheduler.h"
#include "harness/spec/base_config.h"
#include "harness/launch/slurm_queue.h"
#include "harness/spec/suite.h"
#include "harness/trace/result.h"
#include "harness/workload.h"

namespace sb {
namespace {

// Slurm's pre-timeout signal comes this long before --time; the job's time adds it and a
// minute of start-up to the points' own limit so that a healthy point is never signalled.
constexpr int kSignalLeadS = 60;

// Paths as the job scripts use them: they run elsewhere, so every one is absolute.
struct Paths {
  std::string dir, exe, suite_file;
};

Paths resolve_paths(const Suite& suite, const ScheduleOptions& opt) {
  namespace fs = std::filesystem;
  Paths p;
  p.dir = fs::absolute(opt.results_dir).lexically_normal().string();
  p.exe = opt.exe.empty() ? self_exe() : opt.exe;
  // /proc/self/exe names a binary replaced since it started (a rebuild) "PATH (deleted)";
  // the tasks run later and must run the file now at PATH.
  const std::string deleted = " (deleted)";
  if (p.exe.size() > deleted.size() &&
      p.exe.compare(p.exe.size() - deleted.size(), deleted.size(), deleted) == 0)
    p.exe.resize(p.exe.size() - deleted.size());
  p.suite_file = fs::absolute(suite.file).lexically_normal().string();
  return p;
}

// The CPUs a task asks for: the threads each rank will use. threads = 0 ("the node's cores
// shared by its ranks") is decided on the node, after Slurm has allotted the CPUs, so a real
// cluster's job cannot ask for it; the local cluster keeps asking for one CPU, as before.
int cpus_per_task(const Point& p, const SlurmSite& site) {
  const int threads = base_config(p).threads;
  return site.local_cluster ? std::max(1, threads) : threads;
}

// (world, cpus per task) -> the points to submit, in index order. Points of one world size
// that use different thread counts go into separate arrays: one array has one --cpus-per-task,
// and giving every task the largest would leave cores idle and break the binding.
using Groups = std::map<std::pair<int, int>, std::vector<const Point*>>;

Groups points_to_submit(const Suite& suite, const ScheduleOptions& opt, const SlurmSite& site,
                        const std::string& dir) {
  std::string queue_error;
  const auto queued = opt.dry_run ? std::map<std::int64_t, std::string>{}
                                  : queued_points(dir, &queue_error);
  if (!queue_error.empty()) std::fprintf(opt.out, "warning: %s\n", queue_error.c_str());
  Groups groups;
  std::vector<std::int64_t> no_threads;
  for (const Point& p : suite.points) {
    std::string why;
    if (!point_needs_run(dir, p, opt.retry_failed, &why)) {
      std::fprintf(opt.out, "point %d %s: skipped, %s\n", p.index, p.id.c_str(), why.c_str());
      continue;
    }
    if (const auto q = queued.find(p.index); q != queued.end()) {
      std::fprintf(opt.out, "point %d %s: skipped, already %s in Slurm\n", p.index,
                   p.id.c_str(), q->second.c_str());
      continue;
    }
    const int cpus = cpus_per_task(p, site);
    if (cpus == 0) no_threads.push_back(p.index);
    groups[{base_config(p).world, cpus}].push_back(&p);
  }
  const std::size_t n = no_threads.size();
  if (n > 8) no_threads.resize(8);  // the first few name the pattern; a suite may have 10000
  if (n > 0)
    SB_FAIL("{} of {} (index {}) {} threads at 0, the node's cores shared by its "
            "ranks, which is decided on the node after Slurm has allotted the CPUs: a job script "
            "cannot ask for the cores such a point uses. Set threads = N (cores per rank) in "
            "[base] of {}, or vary it under [axes]; on the one-node cluster of "
            "jobscripts/local-cluster.sh pass --local-cluster",
            n == 1 ? "1 point" : fmt::format("{} points", n), suite.name,
            fmt::format("{}{}", fmt::join(no_threads, ", "), n > 8 ? ", ..." : ""),
            n == 1 ? "leaves" : "leave", suite.file);
  return groups;
}

JobScriptSpec job_spec(const Suite& suite, const ScheduleOptions& opt, const SlurmSite& site,
                       const std::vector<const Point*>& points, const Paths& paths) {
  JobScriptSpec js;
  js.suite_name = suite.name;
  js.suite_file = paths.suite_file;
  js.results_dir = paths.dir;
  js.exe = paths.exe;
  js.world = base_config(*points.front()).world;
  js.threads = cpus_per_task(*points.front(), site);
  js.max_parallel = opt.max_parallel;
  const SlurmTable& t = suite.slurm;
  js.partition = opt.partition.empty() ? t.partition : opt.partition;  // the flag wins
  for (char c : opt.partition)
    SB_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ',',
             "--partition '{}' is not a Slurm partition name", opt.partition);
  js.account = t.account;
  js.qos = t.qos;
  js.gres = t.gres;
  js.constraint = t.constraint;
  js.nodes = t.nodes;
  js.extra = t.extra;
  double limit_s = 0;
  std::string launcher;
  for (const Point* p : points) {
    js.indices.push_back(p->index);
    const BaseConfig b = base_config(*p);
    limit_s = std::max(limit_s, b.time_limit_s);
    // One script runs every task the same way; mixed launchers need --launcher.
    SB_CHECK(!opt.launcher.empty() || launcher.empty() || launcher == b.launcher,
             "points of world size {} use different launchers ({} and {}); pass --launcher",
             js.world, launcher, b.launcher);
    launcher = b.launcher;
  }
  js.launcher = opt.launcher.empty() ? launcher : opt.launcher;
  // --time-min, else [slurm] time, else the points' own limit with room for the signal.
  js.time_min = opt.time_min > 0 ? opt.time_min
                : t.time_s > 0   ? static_cast<int>((t.time_s + 59) / 60)
                : limit_s > 0    ? static_cast<int>(std::ceil((limit_s + kSignalLeadS + 60) / 60))
                                 : 60;
  // The signal must come before the end, also for short --time-min values.
  js.signal_s = std::min(kSignalLeadS, std::max(10, js.time_min * 60 / 4));
  LaunchSpec ls;
  ls.world = js.world;
  ls.threads = js.threads;
  ls.as_root = geteuid() == 0;  // the job runs as the user who submits it
  js.launch_prefix = job_launch_prefix(js.launcher, ls, site);
  return js;
}

// sbatch of one written script; records the submission for `status` and resubmission.
void submit_script(const std::string& script, const JobScriptSpec& js, const Paths& paths,
                   const ScheduleOptions& opt) {
  ProcessOptions po;
  po.capture_stdout = true;
  po.timeout_s = 60;
  const ProcessResult r = run_process({"sbatch", "--parsable", script}, po);
  SB_CHECK(r.ok(), "sbatch {} failed ({}): {}; the script is kept for inspection", script,
           r.describe(), r.output);
  // --parsable prints "jobid" or "jobid;cluster".
  std::string job = r.output.substr(0, r.output.find_first_of(";\n"));
  SB_CHECK(!job.empty() && job.find_first_not_of("0123456789") == std::string::npos,
           "sbatch {} printed '{}', not a job id", script, r.output);
  Submission s;
  s.job_id = job;
  s.world = js.world;
  s.points = js.indices;
  s.script = script;
  s.submitted_at = iso_time_now();
  append_submission(paths.dir, s);
  std::fprintf(opt.out, "submitted job array %s: %zu points on %d ranks (--array=%s), "
               "script %s\n", job.c_str(), js.indices.size(), js.world,
               array_spec(js.indices, opt.max_parallel).c_str(), script.c_str());
}

class SlurmScheduler final : public Scheduler {
 public:
  std::string name() const override { return "slurm"; }

  // The array tasks of our submissions that squeue still lists (RESULTS/submissions.json).
  std::map<std::int64_t, std::string> active_points(const std::string& dir,
                                                    std::string* note) const override {
    return queued_points(dir, note);
  }

  int schedule(const Suite& suite, const ScheduleOptions& opt) const override {
    SlurmSite site;
    site.local_cluster = opt.local_cluster;
    return submit_suite(suite, opt, site);
  }
};

const Registrar kRegister([] {
  SchedulerInfo i;
  i.make = [] { return std::unique_ptr<Scheduler>(new SlurmScheduler); };
  i.needs_cluster = true;
  i.job_arrays = true;      // one sbatch --array per world size and thread count
  i.job_time_limit = true;  // sbatch --time
  i.partitions = true;      // sbatch --partition
  i.local_cluster = true;   // jobscripts/local-cluster.sh
  i.allocates = true;       // each array task is an allocation (srun starts ranks there)
  register_scheduler("slurm", "sbatch job arrays, one per world size and thread count",
                     std::move(i));
});
}  // namespace

int submit_suite(const Suite& suite, const ScheduleOptions& opt, const SlurmSite& site) {
  namespace fs = std::filesystem;
  const Paths paths = resolve_paths(suite, opt);
  // A dry run leaves only its scripts: no manifest, so `status` never lists its points as
  // the pending work of a submission that did not happen.
  if (!opt.dry_run) {
    fs::create_directories(paths.dir + "/points");
    fs::create_directories(paths.dir + "/logs");
    write_manifest(paths.dir, suite);
  }
  const Groups groups = points_to_submit(suite, opt, site, paths.dir);
  if (groups.empty()) {
    std::fprintf(opt.out, "nothing to submit: every point of %s is done or queued\n",
                 suite.name.c_str());
    return 0;
  }
  if (!opt.dry_run)
    SB_CHECK(have_program("sbatch"), "sbatch not found on PATH; is Slurm installed and "
                                     "SLURM_CONF set (jobscripts/local-cluster.sh start)?");
  fs::create_directories(paths.dir + "/slurm");
  bool warned_root = false;
  std::map<int, int> arrays_per_world;
  for (const auto& [key, points] : groups) ++arrays_per_world[key.first];
  const std::string tmpl = read_job_template("sbatch-array.sh.in");
  for (const auto& [key, points] : groups) {
    JobScriptSpec js = job_spec(suite, opt, site, points, paths);
    // "-w4", or "-w4-t8" when points on 4 ranks use more than one thread count.
    js.job_tag = arrays_per_world[js.world] > 1 ? fmt::format("w{}-t{}", js.world, js.threads)
                                                : fmt::format("w{}", js.world);
    const std::string text = render_job_script(tmpl, js);
    const std::string script = fmt::format("{}/slurm/{}-{}.sbatch", paths.dir, suite.name,
                                           js.job_tag);
    write_file_atomic(script, text);
    fs::permissions(script, fs::perms::owner_exec | fs::perms::group_exec, fs::perm_options::add);
    if (opt.dry_run) {
      std::fprintf(opt.out, "---- %s (not submitted: --dry-run)\n%s", script.c_str(), text.c_str());
      continue;
    }
    const std::string& root_flag = launcher_info(js.launcher).root_flag;
    if (!site.local_cluster && !root_flag.empty() && geteuid() == 0 && !warned_root) {
      std::fprintf(opt.out, "warning: submitting as root: launcher %s refuses to start ranks "
                            "as root on a real cluster (only --local-cluster adds %s)\n",
                   js.launcher.c_str(), root_flag.c_str());
      warned_root = true;
    }
    submit_script(script, js, paths, opt);
  }
  if (!opt.dry_run) std::fprintf(opt.out, "follow with: shardbench status %s\n", paths.dir.c_str());
  return 0;
}

std::vector<std::string> job_launch_prefix(const std::string& launcher, const LaunchSpec& spec,
                                           const SlurmSite& site) {
  const auto l = find_launcher(launcher);
  if (site.local_cluster) return l->prefix(spec);
  if (const auto* pin = dynamic_cast<const PinningLauncher*>(l.get()))
    return pin->pinned_prefix(spec);
  std::vector<std::string> can;
  for (const auto& n : launcher_names())
    if (dynamic_cast<const PinningLauncher*>(find_launcher(n).get())) can.push_back(n);
  SB_FAIL("launcher '{}' cannot pin ranks to cores in a real cluster's job script; use one "
          "that can ({}), or --local-cluster on the one-node cluster", launcher,
          fmt::join(can, ", "));
}

}  // namespace sb
