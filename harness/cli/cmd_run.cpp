// `shardbench run SUITE --point ID|INDEX`: one point on every rank (started by mpirun or
// srun). Runs the point's workload, gathers its records and writes the result from rank 0.
// Failures become a failed result (with rank, host, file:line) and MPI_Abort, so no rank hangs.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <typeinfo>

#include <CLI/CLI.hpp>

#include "harness/cli/command.h"
#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/core/progress.h"
#include "harness/core/signals.h"
#include "harness/launch/launcher.h"
#include "harness/launch/results.h"
#include "harness/spec/suite.h"
#include "harness/trace/result.h"
#include "harness/workload.h"

namespace sb::cli {
namespace {

struct RunArgs {
  std::string suite, point, results;
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

// The message of any exception, with this rank's identity when it does not carry one.
std::string describe(const std::exception& e) {
  if (dynamic_cast<const Error*>(&e) && std::string(e.what()).rfind("[rank", 0) == 0)
    return e.what();
  return fmt::format("[{}] {}: {}", rank_identity(), typeid(e).name(), e.what());
}

// Records a failure of this rank and aborts every rank (others may wait in a collective).
[[noreturn]] void fail_point(const std::string& path, ResultMeta meta, const Recorder& rec,
                             const std::string& reason, double elapsed_s,
                             const std::string& status = "failed") {
  std::fprintf(stderr, "shardbench run: point %s: %s\n", status.c_str(), reason.c_str());
  meta.status = status;
  meta.failure_reason = reason;
  meta.end_time = iso_time_now();
  meta.elapsed_s = elapsed_s;
  try {
    write_result_hdf5(path, meta, rec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "shardbench run: could not record the failure: %s\n", e.what());
  }
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; keep [[noreturn]] honest
}

int run_point(const RunArgs& a) {
  // Before MPI_Init (which takes seconds): a stop signal during start-up must not kill us.
  install_stop_signals();
  MpiContext mpi(nullptr, nullptr);
  const double t0 = MPI_Wtime();
  // Before the point is known no result file can be named: report and abort.
  Suite suite;
  const Point* point = nullptr;
  try {
    suite = load_suite(a.suite);
    point = &find_point(suite, a.point);
  } catch (const std::exception& e) {
    if (mpi.rank() == 0) std::fprintf(stderr, "shardbench run: error: %s\n", e.what());
    return 1;  // every rank loaded the same file and failed the same way: no abort needed
  }
  const Point& p = *point;
  const std::string dir = a.results.empty() ? default_results_dir(suite) : a.results;
  const std::string path = result_path(dir, p.index, p.id);

  ResultMeta meta = make_result_meta(suite, p);
  meta.world_size = mpi.size();
  meta.threads_per_rank = launch_spec_for(p).threads;
  meta.command_line = own_command_line();
  meta.hosts = json_string_list({mpi.host()});
  Recorder rec;
  try {
    const std::vector<std::string> hosts = gather_strings(mpi.host(), mpi.world());
    if (mpi.rank() == 0) meta.hosts = json_string_list(hosts);
    const std::int64_t want = p.has("world") ? p.get_int("world") : 1;
    SB_CHECK(want == mpi.size(), "point {} ({}) needs world={} ranks but was started on {}; "
             "launch it with -np {} (or let `shardbench sweep` launch it)",
             p.index, p.name, want, mpi.size(), want);
  } catch (const std::exception& e) {
    // Every rank sees the same mismatch; rank 0 records it once.
    if (mpi.rank() == 0) {
      meta.status = "failed";
      meta.failure_reason = describe(e);
      meta.end_time = iso_time_now();
      write_result_hdf5(path, meta, rec);
      std::fprintf(stderr, "shardbench run: error: %s\n", e.what());
    }
    return 1;
  }

  const TaskInfo* task = find_task(p.get_string("task"));
  auto progress = make_progress(mpi.rank() == 0, stderr);
  StopFlag stop;
  StopCause cause = StopCause::None;
  {
    const double limit = p.has("time_limit") ? p.get_double("time_limit") : 0;
    StopWatcher watcher(stop, limit);
    try {
      SB_CHECK(task != nullptr, "no workload is registered for task '{}' (point {})",
               p.get_string("task"), p.index);
      std::unique_ptr<Workload> w = task->make();
      RunContext ctx{p, mpi.world(), mpi.rank(), mpi.size(), rec, *progress, stop};
      w->run(ctx);
      progress->end();
    } catch (const std::exception& e) {
      progress->end();
      // A workload that answers a stop signal by throwing was interrupted, not broken: the
      // point stays incomplete (rerun later). Other ranks may be mid-collective: abort anyway.
      if (watcher.cause() == StopCause::Signal)
        fail_point(path, meta, rec,
                   fmt::format("{} after {} steps; the workload ended with: {}", stop.reason,
                               rec.steps().size(), describe(e)),
                   MPI_Wtime() - t0, "incomplete");
      fail_point(path, meta, rec, describe(e), MPI_Wtime() - t0);
    }
    cause = watcher.cause();
  }
  // Non-finite losses are a failure of the point even when the workload did not notice.
  for (const auto& s : rec.steps())
    if (!std::isfinite(s.loss))
      fail_point(path, meta, rec,
                 fmt::format("[{}] non-finite loss {} at step {}", rank_identity(), s.loss,
                             s.step),
                 MPI_Wtime() - t0);

  try {
    rec.gather(mpi.world());
  } catch (const std::exception& e) {
    fail_point(path, meta, rec, describe(e), MPI_Wtime() - t0);
  }
  int code = 0;
  if (mpi.rank() == 0) {
    meta.end_time = iso_time_now();
    meta.elapsed_s = MPI_Wtime() - t0;
    const auto tv = rec.texts().find("torch_version");
    meta.versions = versions_json(tv == rec.texts().end() ? "" : tv->second);
    if (stop.stop()) {
      // A time limit is a property of the point (rerunning would hit it again): failed.
      // A signal is an interruption (Slurm's pre-timeout, a stopped sweep): rerun later.
      const std::string after =
          fmt::format(" after {} steps, {:.1f} s", rec.steps().size(), MPI_Wtime() - t0);
      meta.status = cause == StopCause::TimeLimit ? "failed" : "incomplete";
      meta.failure_reason = stop.reason + after;
      code = cause == StopCause::TimeLimit ? 1 : 2;
    }
    try {
      write_result_hdf5(path, meta, rec);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "shardbench run: error: %s\n", e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    print_summary(stdout, meta, rec);
    std::fprintf(stdout, "result: %s\n", path.c_str());
  }
  MPI_Bcast(&code, 1, MPI_INT, 0, mpi.world());
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
