// Scheduler "local" (`shardbench sweep`): the points one after another on this machine,
// each through its launcher in its own process group, killed at its time limit (+ grace).
// Done points are skipped, so an interrupted sweep resumes where results are missing.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "harness/core/machine.h"
#include "harness/core/memory_limits.h"
#include "harness/core/progress.h"
#include "harness/core/signals.h"
#include "harness/core/subprocess.h"
#include "harness/launch/launcher.h"
#include "harness/launch/out_of_memory.h"
#include "harness/launch/results.h"
#include "harness/launch/results_lock.h"
#include "harness/launch/scheduler.h"
#include "harness/launch/sweep_eta.h"
#include "harness/spec/base_config.h"
#include "harness/spec/suite.h"
#include "harness/workload.h"

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

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

// Best effort: a log line must not stop the sweep (the disk may be full).
void append_log(const std::string& log, const std::string& line) {
  if (FILE* f = std::fopen(log.c_str(), "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

// A rank killed outright writes nothing; mpirun names it in the log ("mpirun noticed that
// process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."). Returns ": <that>"
// " (<that>)" for the first line of the failure reason, "" when the log has no such line.
std::string rank_death(const std::string& log) {
  const std::string tail = tail_lines(log, 40);
  const std::string key = "noticed that ";
  const size_t at = tail.find(key + "process rank ");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  const size_t end = tail.find('\n', from);
  std::string line = tail.substr(from, end == std::string::npos ? std::string::npos : end - from);
  while (!line.empty() && (line.back() == '.' || line.back() == ' ')) line.pop_back();
  return " (" + line + ")";
}

// RESULTS/running.json names the point being run while it runs (`status` shows it); removed
// on every way out, so a sweep that failed never leaves it stale.
class RunningMarker {
 public:
  RunningMarker(const std::string& dir, const Point& p) : path_(dir + "/running.json") {
    nlohmann::json running = {{"pid", getpid()}, {"index", p.index}, {"id", p.id}};
    try {
      write_file_atomic(path_, running.dump() + "\n");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardbench sweep: warning: %s\n", e.what());
    }
  }
  ~RunningMarker() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  RunningMarker(const RunningMarker&) = delete;
  RunningMarker& operator=(const RunningMarker&) = delete;

 private:
  std::string path_;
};

// All of a point's ranks run here: more ranks x threads than cores time the OS scheduler, not
// the code (paper.toml's world 4 x 2 threads on 2 cores gave a 54.9x "speed-up"). Refused
// unless asked for; then said once, and every result records cores and ranks per node.
void refuse_oversubscription(const Suite& suite, const ScheduleOptions& opt) {
  const int cores = usable_cores();
  const auto over = oversubscribed_points(suite, cores, opt.np_max);
  if (over.empty()) return;
  std::string list;
  for (const auto& o : over) list += "\n  " + o;
  if (opt.allow_oversubscribe) {
    std::fprintf(stderr, "shardbench sweep: warning: %zu point%s oversubscribe this machine's %d "
                 "cores; their timings measure contention, not the code:%s\n", over.size(),
                 over.size() == 1 ? "" : "s", cores, list.c_str());
    return;
  }
  SB_FAIL("{} point{} of suite {} need more threads than this machine's {} cores:{}\nTimings "
          "of an oversubscribed run measure contention, not the code. Lower `threads` or "
          "`world` in the suite, skip them with --np-max, run them on a cluster (`shardbench "
          "submit`), or pass --allow-oversubscribe to run them anyway.", over.size(),
          over.size() == 1 ? "" : "s", suite.name, cores, list);
}

// Whether `want` (a --points entry) names p: its id or its index.
bool names(const std::string& want, const Point& p) { return want == p.id || want == std::to_string(p.index); }

// Whether --points (ScheduleOptions::only) asks for p; all when empty.
bool asked(const ScheduleOptions& opt, const Point& p) {
  return opt.only.empty() ||
         std::any_of(opt.only.begin(), opt.only.end(), [&](const std::string& w) { return names(w, p); });
}

// The points this sweep will run, in order (not done, within --np-max and --points).
std::vector<const Point*> points_to_run(const Suite& suite, const ScheduleOptions& opt,
                                        const std::string& dir) {
  std::vector<const Point*> out;
  std::string why;
  for (const Point& p : suite.points)
    if (asked(opt, p) && point_needs_run(dir, p, opt.retry_failed, &why) &&
        !(opt.np_max > 0 && base_config(p).world > opt.np_max))
      out.push_back(&p);
  return out;
}

// A launcher that starts ranks only inside an allocation (srun) fails at once outside one, so
// the sweep refuses before running anything, naming the points and the fix. Whether this
// scheduler's own jobs are an allocation is its record's to say.
void refuse_missing_allocation(const std::vector<const Point*>& todo, const ScheduleOptions& opt,
                               bool scheduler_allocates) {
  std::map<std::string, std::vector<std::int64_t>> by_launcher;  // launcher -> point indices
  for (const Point* p : todo)
    by_launcher[opt.launcher.empty() ? base_config(*p).launcher : opt.launcher].push_back(p->index);
  for (const auto& [launcher, points] : by_launcher) {
    const std::string why = allocation_problem(launcher, scheduler_allocates);
    if (!why.empty())
      SB_FAIL("{} point{} ({}) cannot run here: {}", points.size(),
              points.size() == 1 ? "" : "s", fmt::format("{}", fmt::join(points, ", ")), why);
  }
}

class LocalScheduler final : public Scheduler {
 public:
  std::string name() const override { return "local"; }

  int schedule(const Suite& suite, const ScheduleOptions& opt) const override {
    namespace fs = std::filesystem;
    const std::string dir = opt.results_dir;
    for (const auto& want : opt.only)
      SB_CHECK(std::any_of(suite.points.begin(), suite.points.end(),
                           [&](const Point& p) { return names(want, p); }),
               "--points: suite {} has no point {} (`shardbench plan` lists ids and indices)", suite.name, want);
    Suite asked_points = suite;  // the oversubscription check looks at what runs
    auto& pts = asked_points.points;
    pts.erase(std::remove_if(pts.begin(), pts.end(), [&](const Point& p) { return !asked(opt, p); }), pts.end());
    refuse_oversubscription(asked_points, opt);
    refuse_missing_allocation(points_to_run(suite, opt, dir), opt,
                              scheduler_info(name()).allocates);
    const ResultsLock lock(dir);
    fs::create_directories(dir + "/points");
    fs::create_directories(dir + "/logs");
    write_manifest(dir, suite);
    const std::string exe = opt.exe.empty() ? self_exe() : opt.exe;
    install_stop_signals();  // SIGTERM/SIGINT to the sweep: stop the running point cleanly

    auto progress = make_progress(true, stderr);
    progress->begin(fmt::format("sweep {}", suite.name), static_cast<long>(suite.points.size()));
    std::vector<const Point*> todo = points_to_run(suite, opt, dir);  // for the ETA
    SweepEta eta;
    const bool tty = isatty(fileno(opt.out)) != 0;
    long handled = 0;
    int failed = 0, ran = 0, skipped = 0;
    for (const Point& p : suite.points) {
      if (received_stop_signal() != 0) break;
      if (!asked(opt, p)) {  // --points: left as it is, said nowhere (search runs one at a time)
        ++handled;
        progress->step(handled, "");
        continue;
      }
      std::string why;
      const int world = base_config(p).world;
      const std::string head = fmt::format("[{}/{}] point {} {} ({})", p.index + 1,
                                           suite.points.size(), p.index, p.id, p.name);
      std::string line;
      bool unrecorded = false;  // failed, but not even its failure could be written
      if (!point_needs_run(dir, p, opt.retry_failed, &why)) {
        line = fmt::format("{}: skipped, {}", head, why);
        ++skipped;
      } else if (opt.np_max > 0 && world > opt.np_max) {
        line = fmt::format("{}: skipped, needs {} ranks and --np-max is {}", head, world,
                           opt.np_max);
        ++skipped;
      } else {
        const auto t0 = std::chrono::steady_clock::now();
        line = fmt::format("{}: {}", head, run_point(suite, p, opt, exe, dir, &unrecorded));
        eta.record(p, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        ++ran;
      }
      todo.erase(std::remove(todo.begin(), todo.end(), &p), todo.end());
      progress->set_eta(eta.remaining(todo));
      // A failure that could not be recorded (a full disk) still counts.
      if (unrecorded || read_result_summary(result_path(dir, p.index, p.id)).status == "failed")
        ++failed;
      std::fprintf(opt.out, "%s%s\n", tty ? "\r\033[K" : "", line.c_str());
      std::fflush(opt.out);
      progress->step(++handled, fmt::format("point {}", p.index));
    }
    progress->end();
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

  // The point a live local sweep is running (RESULTS/running.json); none when its sweep is
  // gone (a stale marker).
  std::map<std::int64_t, std::string> active_points(const std::string& dir,
                                                    std::string* /*note*/) const override {
    std::ifstream in(dir + "/running.json");
    if (!in) return {};
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      const auto j = nlohmann::json::parse(ss.str());
      if (kill(j.at("pid").get<int>(), 0) != 0) return {};
      return {{j.at("index").get<std::int64_t>(), "running"}};
    } catch (const nlohmann::json::exception&) {
      return {};
    }
  }

 private:
  // Runs one point through its launcher; returns a one-line outcome.
  // *unrecorded: set when the point failed and even its failure could not be written.
  static std::string run_point(const Suite& suite, const Point& p, const ScheduleOptions& opt,
                               const std::string& exe, const std::string& dir,
                               bool* unrecorded) {
    const BaseConfig base = base_config(p);
    const std::string launcher_name = !opt.launcher.empty() ? opt.launcher : base.launcher;
    const auto launcher = find_launcher(launcher_name);
    std::vector<std::string> argv = launcher->prefix(launch_spec_for(p));
    for (const std::string& a : {exe, std::string("run"), suite.file, std::string("--point"),
                                 std::to_string(p.index), std::string("--results"), dir})
      argv.push_back(a);

    const std::string log = point_log_path(dir, p.index, p.id);
    remove_stale_temporaries(result_path(dir, p.index, p.id));
    const double limit = base.time_limit_s;
    ProcessOptions po;
    po.log_file = log;
    po.timeout_s = limit > 0 ? limit + grace_s(limit) : 0;
    // Interrupting the sweep: SIGUSR1 (forwarded by mpirun and srun) asks the ranks to stop
    // after the current step and write an incomplete result; a timeout is not graceful.
    po.should_stop = [] { return received_stop_signal() != 0; };
    po.stop_signal = SIGUSR1;
    RunningMarker running(dir, p);
    append_log(log, fmt::format("==== {} shardbench sweep: {}", iso_time_now(), command_line(argv)));
    const auto t0 = std::chrono::steady_clock::now();
    if (po.should_stop()) return "not started, sweep interrupted";
    const OomKillWatch oom;  // a rank the kernel kills for memory writes nothing itself
    const ProcessResult r = run_process(argv, po);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The failure tests time "all ranks gone" from this line.
    append_log(log, fmt::format("==== {} launcher ended: {} after {:.3f} s, unix time {:.3f}",
                                iso_time_now(), r.describe(), secs, unix_now()));
    if (r.stopped && !read_result_summary(result_path(dir, p.index, p.id)).exists)
      return fmt::format("interrupted after {:.1f} s before it wrote a result; it reruns on "
                         "resume", secs);
    try {
      settle_result(suite, p, dir, log, launcher_name, limit, r, secs, oom.killed());
    } catch (const std::exception& e) {  // e.g. no space left to record the failure either
      *unrecorded = true;
      return fmt::format("failed in {:.1f} s and the failure could not be recorded: {}", secs,
                         e.what());
    }
    return outcome(result_path(dir, p.index, p.id), log, secs);
  }

  // After the launcher ended: make the result file say what happened when the ranks could
  // not (killed, aborted before writing, stopped by a signal the sweep did not send).
  // `oom_killed`: OomKillWatch::killed() over the point's run ("" when no OOM kill).
  static void settle_result(const Suite& suite, const Point& p, const std::string& dir,
                            const std::string& log, const std::string& launcher_name,
                            double limit, const ProcessResult& r, double secs,
                            const std::string& oom_killed) {
    const std::string path = result_path(dir, p.index, p.id);
    const ResultSummary s = read_result_summary(path);
    if (!oom_killed.empty() && s.status != "done") {
      record_oom_kill(suite, p, dir, log, r, s, oom_killed);
      return;
    }
    std::string reason;
    if (r.timed_out && s.status != "done" && s.status != "failed") {
      // The point ignored its own time limit. A point that recorded its own time limit as
      // failed keeps that result and its partial trace (docs/HDF5_SCHEMA.md).
      reason = fmt::format("time limit of {} s exceeded; launcher killed after {:.1f} s ({})",
                           limit, secs, r.describe());
    } else if (s.status == "incomplete" && !r.stopped && !r.ok()) {
      // The sweep did not ask it to stop: a signal from elsewhere (mpirun ending the ranks
      // after another rank died) interrupted it. A failure, or every sweep would rerun it.
      reason = fmt::format("launcher {} ended with {} and the ranks were stopped by a signal "
                           "the sweep did not send ({})", launcher_name, r.describe(),
                           s.failure_reason);
    } else if (!s.exists || (s.status != "done" && s.status != "failed" &&
                             s.status != "incomplete")) {
      reason = fmt::format("launcher {} ended with {}{} and left no result", launcher_name,
                           r.describe(), rank_death(log));
    }
    if (reason.empty()) return;
    std::error_code ec;
    if (s.exists) std::filesystem::remove(path, ec);
    record_point_failure(dir, suite, p, reason, log);
  }

  // A rank killed for memory under a cgroup limit: the same message as a rank that caught
  // its allocation failure. It replaces what the surviving ranks recorded (an MPI error or a
  // stop: consequences), keeping their partial trace; that reason follows it.
  static void record_oom_kill(const Suite& suite, const Point& p, const std::string& dir,
                              const std::string& log, const ProcessResult& r,
                              const ResultSummary& s, const std::string& killed) {
    const std::string death = rank_death(log);
    // The killed rank says nothing; the others' partial trace says how far the point got.
    const std::string when = s.exists && s.steps > 0 ? fmt::format("after step {}", s.steps - 1) : "";
    std::string reason = out_of_memory_message(
        p, MemoryKind::Host, death.empty() ? "" : "a rank" + death, when,
        killed + "; launcher " + r.describe(), memory_limits());
    const std::string path = result_path(dir, p.index, p.id);
    if (s.exists && (s.status == "failed" || s.status == "incomplete")) {
      mark_result_failed(path, fmt::format("{}\n(the other ranks then recorded: {}; log: {})",
                                           reason, s.failure_reason, log));
      return;
    }
    std::error_code ec;
    if (s.exists) std::filesystem::remove(path, ec);
    record_point_failure(dir, suite, p, reason, log);
  }

  static std::string outcome(const std::string& path, const std::string& log, double secs) {
    const ResultSummary s = read_result_summary(path);
    std::string out = fmt::format("{} in {:.1f} s", s.status.empty() ? "pending" : s.status, secs);
    if (!s.failure_reason.empty())
      out += " -- " + s.failure_reason.substr(0, s.failure_reason.find('\n'));
    if (s.status != "done" && s.failure_reason.find("(log: ") == std::string::npos)
      out += fmt::format(" (log: {})", log);
    return out;
  }
};

const Registrar kRegister([] {
  SchedulerInfo i;
  i.make = [] { return std::unique_ptr<Scheduler>(new LocalScheduler); };
  i.needs_cluster = false;  // this machine, one point after another
  i.allocates = false;      // srun only where the sweep itself runs inside an allocation
  register_scheduler("local", "every point here, one after another, through its launcher",
                     std::move(i));
});
}  // namespace

}  // namespace sb
