// Scheduler "local" (`shardbench sweep`): the points one after another on this machine,
// each through its launcher in its own process group, killed at its time limit (+ grace).
// Done points are skipped, so an interrupted sweep resumes where results are missing.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "harness/core/progress.h"
#include "harness/core/signals.h"
#include "harness/core/subprocess.h"
#include "harness/launch/launcher.h"
#include "harness/launch/results.h"
#include "harness/launch/scheduler.h"
#include "harness/spec/suite.h"

namespace sb {
namespace {

// After the time limit the point's own watchdog stops it and it writes a partial trace;
// this is how long we wait for that before killing the launcher's process group.
double grace_s(double time_limit_s) { return 10.0 + 0.1 * time_limit_s; }

// Temporaries of this point's result left by killed writers (<file>.tmp.<pid>): never read,
// only in the way of someone looking at the folder.
void remove_stale_temporaries(const std::string& result_file) {
  namespace fs = std::filesystem;
  const fs::path f(result_file);
  const std::string prefix = f.filename().string() + ".tmp.";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(f.parent_path(), ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove(e.path(), ec);
}

class LocalScheduler final : public Scheduler {
 public:
  std::string name() const override { return "local"; }

  int schedule(const Suite& suite, const ScheduleOptions& opt) const override {
    namespace fs = std::filesystem;
    const std::string dir = opt.results_dir;
    fs::create_directories(dir + "/points");
    fs::create_directories(dir + "/logs");
    write_manifest(dir, suite);
    const std::string exe = opt.exe.empty() ? self_exe() : opt.exe;
    install_stop_signals();  // SIGTERM/SIGINT to the sweep: stop the running point cleanly

    auto progress = make_progress(true, stderr);
    progress->begin(fmt::format("sweep {}", suite.name), static_cast<long>(suite.points.size()));
    const bool tty = isatty(fileno(opt.out)) != 0;
    long handled = 0;
    int failed = 0, ran = 0, skipped = 0;
    for (const Point& p : suite.points) {
      if (received_stop_signal() != 0) break;
      std::string why;
      const int world = p.has("world") ? static_cast<int>(p.get_int("world")) : 1;
      const std::string head = fmt::format("[{}/{}] point {} {} ({})", p.index + 1,
                                           suite.points.size(), p.index, p.id, p.name);
      std::string line;
      if (!point_needs_run(dir, p, opt.retry_failed, &why)) {
        line = fmt::format("{}: skipped, {}", head, why);
        ++skipped;
      } else if (opt.np_max > 0 && world > opt.np_max) {
        line = fmt::format("{}: skipped, needs {} ranks and --np-max is {}", head, world,
                           opt.np_max);
        ++skipped;
      } else {
        line = fmt::format("{}: {}", head, run_point(suite, p, opt, exe, dir));
        ++ran;
      }
      if (read_result_summary(result_path(dir, p.index, p.id)).status == "failed") ++failed;
      std::fprintf(opt.out, "%s%s\n", tty ? "\r\033[K" : "", line.c_str());
      std::fflush(opt.out);
      progress->step(++handled, fmt::format("point {}", p.index));
    }
    progress->end();
    std::error_code ec;
    fs::remove(dir + "/running.json", ec);
    if (received_stop_signal() != 0) {
      std::fprintf(opt.out, "sweep interrupted by signal %d after %ld of %zu points; run the "
                   "same command again to resume\n", received_stop_signal(), handled,
                   suite.points.size());
      return 128 + received_stop_signal();
    }
    std::fprintf(opt.out, "sweep %s: %d ran, %d skipped, %d failed; results in %s\n",
                 suite.name.c_str(), ran, skipped, failed, dir.c_str());
    return failed > 0 ? 1 : 0;
  }

 private:
  // Runs one point through its launcher; returns a one-line outcome.
  static std::string run_point(const Suite& suite, const Point& p, const ScheduleOptions& opt,
                               const std::string& exe, const std::string& dir) {
    const std::string launcher_name =
        !opt.launcher.empty() ? opt.launcher
                              : (p.has("launcher") ? p.get_string("launcher") : "mpirun");
    const auto launcher = find_launcher(launcher_name);
    std::vector<std::string> argv = launcher->prefix(launch_spec_for(p));
    for (const std::string& a : {exe, std::string("run"), suite.file, std::string("--point"),
                                 std::to_string(p.index), std::string("--results"), dir})
      argv.push_back(a);

    const std::string log = point_log_path(dir, p.index, p.id);
    remove_stale_temporaries(result_path(dir, p.index, p.id));
    const double limit = p.has("time_limit") ? p.get_double("time_limit") : 0;
    ProcessOptions po;
    po.log_file = log;
    po.timeout_s = limit > 0 ? limit + grace_s(limit) : 0;
    // Interrupting the sweep: SIGUSR1 (forwarded by mpirun and srun) asks the ranks to stop
    // after the current step and write an incomplete result; a timeout is not graceful.
    po.should_stop = [] { return received_stop_signal() != 0; };
    po.stop_signal = SIGUSR1;
    nlohmann::json running = {{"pid", getpid()}, {"index", p.index}, {"id", p.id}};
    write_file_atomic(dir + "/running.json", running.dump() + "\n");

    std::string cmdline;
    for (const auto& a : argv) cmdline += (cmdline.empty() ? "" : " ") + shell_quote(a);
    if (FILE* f = std::fopen(log.c_str(), "a")) {
      std::fprintf(f, "==== %s shardbench sweep: %s\n", iso_time_now().c_str(), cmdline.c_str());
      std::fclose(f);
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (po.should_stop()) return "not started, sweep interrupted";
    const ProcessResult r = run_process(argv, po);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    const std::string path = result_path(dir, p.index, p.id);
    ResultSummary s = read_result_summary(path);
    if (r.timed_out && s.status != "done") {
      // The point ignored its own time limit: record it failed even over a partial trace.
      std::error_code ec;
      std::filesystem::remove(path, ec);
      record_point_failure(dir, suite, p,
                           fmt::format("time limit of {} s exceeded; launcher killed after {:.1f} s "
                                       "({})", limit, secs, r.describe()),
                           log);
    } else if (r.stopped && !s.exists) {
      // Interrupted before the ranks could write anything: nothing to record, still pending.
      return fmt::format("interrupted after {:.1f} s before it wrote a result; it reruns on "
                         "resume", secs);
    } else if (!s.exists || (s.status != "done" && s.status != "failed" &&
                             s.status != "incomplete")) {
      record_point_failure(dir, suite, p,
                           fmt::format("launcher {} ended with {} and left no result",
                                       launcher_name, r.describe()),
                           log);
    }
    s = read_result_summary(path);
    std::string out = fmt::format("{} in {:.1f} s", s.status, secs);
    if (!s.failure_reason.empty()) out += " -- " + s.failure_reason.substr(0, s.failure_reason.find('\n'));
    if (s.status != "done" && s.failure_reason.find("(log: ") == std::string::npos)
      out += fmt::format(" (log: {})", log);
    return out;
  }
};
}  // namespace

std::unique_ptr<Scheduler> make_local_scheduler() { return std::make_unique<LocalScheduler>(); }

}  // namespace sb
