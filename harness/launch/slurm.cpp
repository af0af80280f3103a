// Scheduler "slurm" (`shardbench submit`): one sbatch job array per world size; array task i
// runs point i through the chosen launcher. Done points, and points Slurm still has queued or
// running from an earlier submission, are not submitted again.
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

class SlurmScheduler final : public Scheduler {
 public:
  std::string name() const override { return "slurm"; }

  // The array tasks of our submissions that squeue still lists (RESULTS/submissions.json).
  std::map<std::int64_t, std::string> active_points(const std::string& dir,
                                                    std::string* note) const override {
    return queued_points(dir, note);
  }

  int schedule(const Suite& suite, const ScheduleOptions& opt) const override {
    namespace fs = std::filesystem;
    // Job scripts run elsewhere: every path in them is absolute.
    const std::string dir = fs::absolute(opt.results_dir).lexically_normal().string();
    fs::create_directories(dir + "/points");
    fs::create_directories(dir + "/logs");
    fs::create_directories(dir + "/slurm");
    write_manifest(dir, suite);
    std::string exe = opt.exe.empty() ? self_exe() : opt.exe;
    // /proc/self/exe names a binary replaced since it started (a rebuild) "PATH (deleted)";
    // the tasks run later and must run the file now at PATH.
    const std::string deleted = " (deleted)";
    if (exe.size() > deleted.size() &&
        exe.compare(exe.size() - deleted.size(), deleted.size(), deleted) == 0)
      exe.resize(exe.size() - deleted.size());
    const std::string suite_file = fs::absolute(suite.file).lexically_normal().string();

    std::string queue_error;
    const auto queued = opt.dry_run ? std::map<std::int64_t, std::string>{}
                                    : queued_points(dir, &queue_error);
    if (!queue_error.empty()) std::fprintf(opt.out, "warning: %s\n", queue_error.c_str());

    // world -> points to submit, in index order.
    std::map<int, std::vector<const Point*>> groups;
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
      groups[base_config(p).world].push_back(&p);
    }
    if (groups.empty()) {
      std::fprintf(opt.out, "nothing to submit: every point of %s is done or queued\n",
                   suite.name.c_str());
      return 0;
    }
    if (!opt.dry_run)
      SB_CHECK(have_program("sbatch"), "sbatch not found on PATH; is Slurm installed and "
                                       "SLURM_CONF set (jobscripts/local-cluster.sh start)?");

    const std::string tmpl = read_job_template("sbatch-array.sh.in");
    for (const auto& [world, points] : groups) {
      JobScriptSpec js = job_spec(suite, opt, points, world, dir, exe, suite_file);
      const std::string text = render_job_script(tmpl, js);
      const std::string script = fmt::format("{}/slurm/{}-w{}.sbatch", dir, suite.name, world);
      write_file_atomic(script, text);
      fs::permissions(script, fs::perms::owner_exec | fs::perms::group_exec,
                      fs::perm_options::add);
      if (opt.dry_run) {
        std::fprintf(opt.out, "---- %s (not submitted: --dry-run)\n%s", script.c_str(),
                     text.c_str());
        continue;
      }
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
      s.world = world;
      s.points = js.indices;
      s.script = script;
      s.submitted_at = iso_time_now();
      append_submission(dir, s);
      std::fprintf(opt.out, "submitted job array %s: %zu points on %d ranks (--array=%s), "
                   "script %s\n", job.c_str(), js.indices.size(), world,
                   array_spec(js.indices, opt.max_parallel).c_str(), script.c_str());
    }
    if (!opt.dry_run)
      std::fprintf(opt.out, "follow with: shardbench status %s\n", dir.c_str());
    return 0;
  }

 private:
  static JobScriptSpec job_spec(const Suite& suite, const ScheduleOptions& opt,
                                const std::vector<const Point*>& points, int world,
                                const std::string& dir, const std::string& exe,
                                const std::string& suite_file) {
    JobScriptSpec js;
    js.suite_name = suite.name;
    js.suite_file = suite_file;
    js.results_dir = dir;
    js.exe = exe;
    js.world = world;
    js.max_parallel = opt.max_parallel;
    js.partition = opt.partition;
    for (char c : js.partition)
      SB_CHECK(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ',',
               "--partition '{}' is not a Slurm partition name", js.partition);
    double limit_s = 0;
    std::string launcher;
    for (const Point* p : points) {
      js.indices.push_back(p->index);
      const BaseConfig b = base_config(*p);
      // threads = 0 means "the node's cores / ranks", which only the node knows; Slurm needs
      // a number, so 0 asks for one CPU per task (and the ranks then share the allocation).
      js.threads = std::max(js.threads, std::max(1, b.threads));
      limit_s = std::max(limit_s, b.time_limit_s);
      const std::string& l = b.launcher;
      // One script runs every task the same way; mixed launchers need --launcher.
      SB_CHECK(opt.launcher.empty() == false || launcher.empty() || launcher == l,
               "points of world size {} use different launchers ({} and {}); pass --launcher",
               world, launcher, l);
      launcher = l;
    }
    js.launcher = opt.launcher.empty() ? launcher : opt.launcher;
    js.time_min = opt.time_min > 0 ? opt.time_min
                  : limit_s > 0    ? static_cast<int>(std::ceil((limit_s + kSignalLeadS + 60) / 60))
                                   : 60;
    // The signal must come before the end, also for short --time-min values.
    js.signal_s = std::min(kSignalLeadS, std::max(10, js.time_min * 60 / 4));
    LaunchSpec ls;
    ls.world = world;
    ls.threads = js.threads;
    ls.as_root = geteuid() == 0;  // the job runs as the user who submits it
    js.launch_prefix = find_launcher(js.launcher)->prefix(ls);
    return js;
  }
};

const Registrar kRegister([] {
  register_scheduler("slurm", [] { return std::unique_ptr<Scheduler>(new SlurmScheduler); });
});
}  // namespace

}  // namespace sb
