// `shardbench run SUITE --point ID|INDEX`: one point on every rank (started by mpirun or
// srun). Runs the point's workload, gathers its records and writes the result from rank 0.
// One failure path: any exception on any rank goes to sb::abort_all() from inside its handler
// (the workload still alive, nothing waiting on MPI), which records the failed result with
// rank, host, file:line and the partial trace, then MPI_Abort ends every rank.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <typeinfo>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "harness/command.h"
#include "harness/core/activity.h"
#include "harness/core/check.h"
#include "harness/core/fault.h"
#include "harness/core/heartbeat.h"
#include "harness/core/memory_limits.h"
#include "harness/core/mpi_context.h"
#include "harness/core/progress.h"
#include "harness/core/rank_log.h"
#include "harness/core/signals.h"
#include "harness/core/subprocess.h"
#include "harness/core/watchdog.h"
#include "harness/launch/launcher.h"
#include "harness/launch/out_of_memory.h"
#include "harness/launch/results.h"
#include "harness/spec/base_config.h"
#include "harness/spec/suite.h"
#include "harness/trace/result.h"
#include "harness/workload.h"

namespace sb::cli {
namespace {

#ifndef SHARDBENCH_SOURCE_DIR
#define SHARDBENCH_SOURCE_DIR "."
#endif

struct RunArgs {
  std::string suite, point, results;
  std::string measured;  // a program's measurements (TaskInfo::exec): write the result, no MPI
  std::string record_failure, log;  // used by job scripts after a launcher failed
};

std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::stringstream ss(all);
  std::string arg;
  while (std::getline(ss, arg, '\0')) out += (out.empty() ? "" : " ") + arg;
  return out;
}

// The message of any exception, with this rank's identity when it does not carry one. A user
// error reads as its message alone; where in our code it was raised goes to the rank log.
std::string describe(const std::exception& e) {
  const std::string what = e.what();
  const bool named = dynamic_cast<const Error*>(&e) && what.rfind("[rank", 0) == 0;
  if (const auto* u = dynamic_cast<const UserError*>(&e)) {
    std::fprintf(stderr, "shardbench run: (the error below was raised at %s)\n", u->origin().c_str());
    return named ? what : fmt::format("[{}] {}", rank_identity(), what);
  }
  if (named) return what;
  return fmt::format("[{}] {}: {}", rank_identity(), typeid(e).name(), what);
}

// A workload's failure: out of memory says what ran out, where, the plan's estimate, the
// limits and the keys to change (out_of_memory.h); anything else as describe() says it.
std::string describe_failure(const std::exception& e, const Point& p) {
  const auto kind = out_of_memory_kind(e);
  if (!kind) return describe(e);
  std::string detail = e.what();
  detail = detail.substr(0, detail.find('\n'));  // LibTorch appends a C++ backtrace
  const std::string at = current_activity();
  return fmt::format("[{}] {}", rank_identity(),
                     out_of_memory_message(p, *kind, "", at.empty() ? "" : "in " + at, detail,
                                           memory_limits()));
}

// What this process records when it fails. One point per process, so one global: the
// failure hook (sb::abort_all) has no other way to reach it.
struct PointState {
  std::string dir, path;  // results folder, result file
  ResultMeta meta;
  const Recorder* rec = nullptr;
  double t0 = 0;
  std::vector<std::string> machine_start;  // every rank's machine_rank_json at the start
  // "incomplete" when the workload answered a stop signal by throwing: interrupted, not
  // broken (rerun later). Still aborted: other ranks may be mid-collective.
  std::string abort_status = "failed";
};
PointState g_point;

// A result of this run already written as failed by some rank (the first failure's reason
// wins: the SIGTERM or MPI error that reaches the other ranks afterwards is a consequence).
// Every rank's start_time precedes any failure of the run (they meet in a collective first).
bool failed_in_this_run(const std::string& path, const ResultMeta& meta) {
  const ResultSummary s = read_result_summary(path);
  return s.exists && s.status == "failed" && s.end_time >= meta.start_time;
}

// Writes the result unless a failure of this run is already recorded there.
void write_result(const ResultMeta& meta, const Recorder& rec) {
  if (failed_in_this_run(g_point.path, meta)) {
    std::fprintf(stderr, "shardbench run: %s already records this run's first failure; "
                 "not replacing it with status %s\n", g_point.path.c_str(), meta.status.c_str());
    return;
  }
  write_result_hdf5(g_point.path, meta, rec);
}

// The failure hook: record this rank's failure with its partial records, then (sb::abort_all)
// MPI_Abort. When the full record does not fit (a full disk), record the reason alone.
void record_failure_hook(const std::string& reason) {
  ResultMeta m = g_point.meta;
  m.status = g_point.abort_status;
  m.failure_reason = reason;
  m.end_time = iso_time_now();
  m.elapsed_s = MPI_Wtime() - g_point.t0;
  try {
    write_result(m, g_point.rec ? *g_point.rec : Recorder{});
  } catch (const std::exception& e) {
    m.failure_reason = reason + "; the partial trace could not be written: " + e.what();
    write_result(m, Recorder{});
  }
}

// Stage 1: the suite and the point, the same on every rank. Before the point is known no
// result file can be named: abort with the message. loaded: the suite was already loaded
// (before MPI_Init, for exec_if_external); else it is loaded here.
const Point& load_point(const RunArgs& a, Suite& suite, bool loaded) {
  try {
    if (!loaded) suite = load_suite(a.suite);
    return find_point(suite, a.point);
  } catch (const std::exception& e) {
    abort_all(describe(e));
  }
}

// Stage 2: provenance and the launch check; from here on a failure is recorded.
void begin_point(const Suite& suite, const Point& p, const RunArgs& a, MpiContext& mpi,
                 const Recorder& rec, double t0) {
  const std::string dir = a.results.empty() ? default_results_dir(suite) : a.results;
  g_point.dir = dir;
  g_point.path = result_path(dir, p.index, p.id);
  tee_output_to(rank_log_path(dir, p.index, p.id, mpi.rank()));
  g_point.meta = make_result_meta(suite, p);
  g_point.meta.world_size = mpi.size();
  g_point.meta.threads_per_rank = launch_spec_for(p).threads;
  g_point.meta.command_line = own_command_line();
  g_point.meta.hosts = json_string_list({mpi.host()});
  g_point.rec = &rec;
  g_point.t0 = t0;
  set_failure_hook(record_failure_hook);
  fault_set_rank(mpi.rank());
  try {
    const std::vector<std::string> hosts = gather_strings(mpi.host(), mpi.world());
    if (mpi.rank() == 0) g_point.meta.hosts = json_string_list(hosts);
    g_point.machine_start = gather_strings(machine_rank_json(mpi.host()), mpi.world());
    // A failure recorded from here on carries the start figures (end load average -1).
    if (mpi.rank() == 0) g_point.meta.machine = machine_json(g_point.machine_start, {});
    const int want = base_config(p).world;
    SB_CHECK(want == mpi.size(), "point {} ({}) needs world={} ranks but was started on {}; "
             "launch it with -np {} (or let `shardbench sweep` launch it)",
             p.index, p.name, want, mpi.size(), want);
    // Every rank expanded the suite itself, and a key left "auto" is chosen from the rank's own
    // node (its memory, cgroup and disk): ranks that chose differently would not match in
    // their collectives, so they stop here, saying where they differ.
    const std::vector<std::string> configs = gather_strings(p.canonical(), mpi.world());
    if (mpi.rank() == 0) {
      const std::string differ = Point::disagreement(configs);
      SB_CHECK(differ.empty(), "point {} ({}) is not the same on every rank ({}); a key left \"auto\" "
               "is chosen by each rank from its own node's memory and disk: set it in the suite "
               "(`shardbench fit {}` prints the choice), or run on nodes alike", p.index, p.name, differ,
               suite.file.empty() ? "SUITE" : suite.file);
    }
  } catch (const std::exception& e) {
    abort_all(describe(e));
  }
}

// Stage 3: the workload. Any exception aborts every rank from inside the handler, while the
// workload (and the communicator and engine it owns) is still alive: nothing waits on MPI
// first. A stop every rank agreed on ends the run normally. Returns whether it was stopped.
bool run_workload(const Point& p, MpiContext& mpi, Recorder& rec, Progress& progress,
                  const StopFlag& stop, const StopWatcher& watcher) {
  const TaskInfo* task = find_task(base_config(p).task);
  std::unique_ptr<Workload> w;
  bool stopped = false;
  try {
    SB_CHECK(task != nullptr, "no workload is registered for task '{}' (point {})",
             base_config(p).task, p.index);
    w = task->make();
    RunContext ctx{p, mpi.world(), mpi.rank(), mpi.size(), rec, progress, stop};
    try {
      w->run(ctx);
    } catch (const Stopped&) {
      stopped = true;
    }
    progress.end();
  } catch (const std::exception& e) {
    progress.end();
    if (watcher.cause() != StopCause::Signal) abort_all(describe_failure(e, p));
    g_point.abort_status = "incomplete";
    abort_all(fmt::format("{} after {} steps; the workload ended with: {}", stop.reason,
                          rec.steps().size(), describe(e)));
  }
  w.reset();  // after a normal end only: its destructors may wait on MPI
  return stopped || stop.stop();
}

// Stage 4 (rank 0): the status, the result file and the console summary. A time limit is
// a property of the point (rerunning would hit it again): failed, with the partial trace. A
// signal is an interruption (Slurm's pre-timeout, a stopped sweep): incomplete, rerun later.
// Returns the exit code: 0 done, 1 failed, 2 incomplete.
int finish_point(const Recorder& rec, const std::string& stop_reason, StopCause cause) {
  ResultMeta& meta = g_point.meta;
  meta.end_time = iso_time_now();
  meta.elapsed_s = MPI_Wtime() - g_point.t0;
  meta.versions = versions_json(rec.texts());
  int code = 0;
  if (cause != StopCause::None) {
    meta.status = cause == StopCause::TimeLimit ? "failed" : "incomplete";
    meta.failure_reason = fmt::format("{} after {} steps, {:.1f} s", stop_reason,
                                      rec.steps().size(), meta.elapsed_s);
    code = cause == StopCause::TimeLimit ? 1 : 2;
  }
  try {
    write_result(meta, rec);
  } catch (const std::exception& e) {
    abort_all(describe(e));  // the hook records the reason alone when it fits
  }
  print_summary(stdout, meta, rec);
  std::fprintf(stdout, "result: %s\n", g_point.path.c_str());
  return code;
}

// A point whose ranks are another program (TaskInfo::exec): replace this process with it,
// before MPI_Init, so it is the launcher's rank. Anything wrong with the point is left to the
// normal path, which reports it on every rank.
void exec_if_external(const RunArgs& a, const Suite& suite) {
  std::vector<std::string> argv;
  try {
    const Point& p = find_point(suite, a.point);
    const TaskInfo* task = find_task(base_config(p).task);
    if (!task || !task->exec) return;
    argv = task->exec(p, {a.suite, a.point, a.results.empty() ? default_results_dir(suite) : a.results,
                          self_exe(), SHARDBENCH_SOURCE_DIR});
  } catch (const std::exception&) {
    return;
  }
  if (argv.empty()) return;
  std::fflush(nullptr);
  std::vector<char*> c;
  for (auto& s : argv) c.push_back(s.data());
  c.push_back(nullptr);
  ::execv(c[0], c.data());
  std::fprintf(stderr, "shardbench run: cannot start %s for point %s: %s\n", argv[0].c_str(),
               a.point.c_str(), std::strerror(errno));
  std::exit(1);
}

// `run --measured FILE`: the result file of a point another program ran (TaskInfo::exec),
// from its measurements; rank 0 of that program calls it after MPI_Finalize. No MPI here.
int write_measured(const RunArgs& a) {
  Suite suite = load_suite(a.suite);
  const Point& p = find_point(suite, a.point);
  const TaskInfo* task = find_task(base_config(p).task);
  SB_CHECK(task && task->record_measured, "point {} (task '{}') does not run as another program; "
           "run it without --measured", p.index, base_config(p).task);
  std::ifstream in(a.measured);
  SB_CHECK(in.good(), "cannot read measurements '{}'", a.measured);
  const auto j = nlohmann::json::parse(in);
  const std::string dir = a.results.empty() ? default_results_dir(suite) : a.results;
  g_point.path = result_path(dir, p.index, p.id);
  ResultMeta& meta = g_point.meta;
  meta = make_result_meta(suite, p);
  meta.world_size = j.at("world").get<std::int64_t>();
  meta.threads_per_rank = launch_spec_for(p).threads;
  meta.command_line = j.at("command_line").get<std::string>();
  meta.hosts = j.at("hosts").dump();
  meta.machine = machine_json(j.at("machine_start").get<std::vector<std::string>>(), {});
  meta.start_time = j.at("start_time").get<std::string>();
  meta.end_time = j.at("end_time").get<std::string>();
  meta.elapsed_s = j.at("elapsed_s").get<double>();
  meta.status = j.at("status").get<std::string>();
  meta.failure_reason = j.value("failure_reason", std::string());
  Recorder rec;
  try {
    task->record_measured(p, a.measured, rec);
  } catch (const std::exception& e) {  // the measurements do not fit the point: recorded as such
    meta.status = "failed";
    meta.failure_reason = fmt::format("the measurements in {} cannot be recorded: {}", a.measured, describe(e));
  }
  meta.versions = versions_json(rec.texts());
  write_result(meta, rec);
  print_summary(stdout, meta, rec);
  std::fprintf(stdout, "result: %s\n", g_point.path.c_str());
  return meta.status == "done" ? 0 : 1;
}

int run_point(const RunArgs& a) {
  if (!a.measured.empty()) return write_measured(a);
  // Loaded once, before MPI_Init, to know whether the point's ranks are another program; a
  // suite that fails here is loaded again after MPI_Init, where its error reaches every rank.
  Suite suite;
  bool loaded = false;
  try {
    suite = load_suite(a.suite);
    loaded = true;
  } catch (const std::exception&) {
  }
  if (loaded) exec_if_external(a, suite);
  // Before MPI_Init (which takes seconds): a stop signal during start-up must not kill us.
  install_stop_signals();
  MpiContext mpi(nullptr, nullptr);
  const double t0 = MPI_Wtime();
  const Point& p = load_point(a, suite, loaded);
  Recorder rec;
  begin_point(suite, p, a, mpi, rec, t0);
  // From here to the last collective of the point, a stalled rank ends every rank.
  std::unique_ptr<Watchdog> watchdog;
  try {
    watchdog = make_watchdog(mpi.world(), base_config(p).stall_timeout_s);
  } catch (const std::exception& e) {
    abort_all(describe(e));
  }

  auto progress = make_progress(mpi.rank() == 0, stderr);
  if (mpi.rank() == 0)  // `status` shows the step and ETA of a running point from this file
    progress = with_status_file(std::move(progress), point_progress_path(g_point.dir, p.index, p.id));
  StopFlag stop;
  StopCause cause = StopCause::None;
  {
    StopWatcher watcher(stop, base_config(p).time_limit_s);
    const bool stopped = run_workload(p, mpi, rec, *progress, stop, watcher);
    cause = stopped ? watcher.cause() : StopCause::None;
  }
  heartbeat::set_phase("gather results");
  // Non-finite losses are a failure of the point even when the workload did not notice.
  for (const auto& s : rec.steps())
    if (!std::isfinite(s.loss))
      abort_all(fmt::format("[{}] non-finite loss {} at step {}", rank_identity(), s.loss,
                            s.step));
  try {
    rec.gather(mpi.world());
  } catch (const std::exception& e) {
    abort_all(describe(e));
  }
  int code = 0;
  // Agreed like the stop itself: rank 0's own watcher may not have seen the signal yet when
  // another rank's did and every rank left the loop (it would record "done").
  int c = static_cast<int>(cause);
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &c, 1, MPI_INT, MPI_MAX, mpi.world()),
            "MPI_Allreduce (stop cause)");
  cause = static_cast<StopCause>(c);
  const std::vector<std::string> reasons =
      gather_strings(cause != StopCause::None && stop.stop() ? stop.reason : "", mpi.world());
  std::string reason;
  for (const auto& r : reasons)
    if (reason.empty()) reason = r;
  const std::vector<std::string> load_end = gather_strings(machine_end_json(), mpi.world());
  if (mpi.rank() == 0) g_point.meta.machine = machine_json(g_point.machine_start, load_end);
  if (mpi.rank() == 0) code = finish_point(rec, reason, cause);
  MPI_Bcast(&code, 1, MPI_INT, 0, mpi.world());
  if (watchdog) watchdog->stop();  // every rank is past the point's last collective
  return code;
}

int record_failure(const RunArgs& a) {
  Suite suite = load_suite(a.suite);
  const Point& p = find_point(suite, a.point);
  const std::string dir = a.results.empty() ? default_results_dir(suite) : a.results;
  const bool wrote = record_point_failure(dir, suite, p, a.record_failure, a.log);
  std::printf("point %d %s: %s\n", p.index, p.id.c_str(),
              wrote ? "recorded as failed" : "already has a result; left as it is");
  return 0;
}

const bool registered = [] {
  register_command({"run", "run one point on every rank (start it with mpirun or srun)",
                    [](CLI::App& sub) {
                      auto a = std::make_shared<RunArgs>();
                      sub.add_option("suite", a->suite, "suite file")->required();
                      sub.add_option("--point", a->point, "point index or id")->required();
                      sub.add_option("--results", a->results,
                                     "results folder (default results/<suite name>)");
                      sub.add_option("--record-failure", a->record_failure,
                                     "do not run: record the point as failed with this reason "
                                     "unless it has a result (job scripts use it)");
                      sub.add_option("--log", a->log,
                                     "with --record-failure: append this log's last lines");
                      sub.add_option("--measured", a->measured,
                                     "do not run: write the result file from the measurements "
                                     "of a point another program ran (the micro task's Python "
                                     "twin calls it)");
                      sub.callback([a] {
                        const int code = a->record_failure.empty() ? run_point(*a)
                                                                   : record_failure(*a);
                        if (code != 0) throw Exit{code};
                      });
                    }});
  return true;
}();

}  // namespace
}  // namespace sb::cli
