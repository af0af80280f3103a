// `sweep`, `run` and `status` end to end with the probe workload (real mpirun, 2 ranks): a
// failing, crashing, out-of-memory or NaN point is recorded failed with its reason while the
// others complete; an interrupted sweep resumes and redoes only what was missing; time limits.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "harness/core/mpi_context.h"
#include "harness/core/subprocess.h"
#include "harness/spec/suite.h"
#include "harness/trace/result.h"

namespace fs = std::filesystem;

namespace {

struct Fixture {
  std::string dir, suite_file, results;
  sb::Suite suite;
  Fixture(const std::string& name, const std::string& toml) {
    dir = (fs::temp_directory_path() / fmt::format("sb-sweep-{}-{}", name, getpid())).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    suite_file = dir + "/" + name + ".toml";
    std::ofstream(suite_file) << toml;
    results = dir + "/results";
    // probe_workload.cpp is linked into this test too, so the suite loads here as well.
    suite = sb::load_suite(suite_file);
  }
  ~Fixture() { fs::remove_all(dir); }
  std::string path(int i) const {
    return sb::result_path(results, i, suite.points.at(static_cast<size_t>(i)).id);
  }
  sb::ResultSummary summary(int i) const { return sb::read_result_summary(path(i)); }
  sb::ProcessResult cli(std::vector<std::string> args,
                        std::map<std::string, std::string> env = {}) const {
    args.insert(args.begin(), SB_PROBE_EXE);
    sb::ProcessOptions po;
    po.capture_stdout = true;
    po.env = std::move(env);
    return sb::run_process(args, po);
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(Sweep, FailuresAreRecordedWithReasonsWhileOthersComplete) {
  Fixture f("failures", R"(
[base]
task = "probe"
world = 2
threads = 1
steps = 3
warmup = 1
[[zip]]
"probe.fail_rank"  = [-1, 1, -1, -1, -1]
"probe.crash_rank" = [-1, -1, 1, -1, -1]
"probe.nan_at"     = [-1, -1, -1, 1, -1]
"probe.elements"   = [8, 8, 8, 8, 16]
)");
  const auto r = f.cli({"sweep", f.suite_file, "--results", f.results});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (int i : {0, 4}) {
    EXPECT_EQ(f.summary(i).status, "done") << i << ": " << f.summary(i).failure_reason;
    EXPECT_EQ(f.summary(i).steps, 3);
  }
  const std::string host = sb::host_name();
  EXPECT_EQ(f.summary(1).status, "failed");
  EXPECT_TRUE(contains(f.summary(1).failure_reason, "[rank 1 on " + host + "] "))
      << f.summary(1).failure_reason;
  EXPECT_TRUE(std::regex_search(f.summary(1).failure_reason,
                                std::regex("probe_workload\\.cpp:[0-9]+: probe\\.fail_rank: rank 1 "
                                           "fails at step 1 as the suite asks")))
      << f.summary(1).failure_reason;
  // A rank killed outright writes nothing: the sweep records the launcher's end and the log.
  EXPECT_EQ(f.summary(2).status, "failed");
  EXPECT_TRUE(contains(f.summary(2).failure_reason, "launcher mpirun ended with exit code "))
      << f.summary(2).failure_reason;
  EXPECT_TRUE(contains(f.summary(2).failure_reason,
                       "and left no result (log: " + sb::point_log_path(f.results, 2, f.suite.points[2].id) +
                           ", last lines below)\n"))
      << f.summary(2).failure_reason;
  EXPECT_TRUE(contains(f.summary(2).failure_reason, "exited on signal 9 (Killed)"))
      << f.summary(2).failure_reason;
  EXPECT_EQ(f.summary(3).status, "failed");
  EXPECT_TRUE(contains(f.summary(3).failure_reason, "non-finite loss nan at step 1"))
      << f.summary(3).failure_reason;

  const auto st = f.cli({"status", f.results});
  EXPECT_EQ(st.exit_code, 0);
  EXPECT_TRUE(contains(st.output, "2 done, 3 failed")) << st.output;
  EXPECT_TRUE(contains(st.output, f.suite.points[1].id + " failed ")) << st.output;

  // Nothing is rerun without --retry-failed, and the failures still set the exit code.
  const auto again = f.cli({"sweep", f.suite_file, "--results", f.results});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(contains(again.output, "0 ran, 5 skipped, 3 failed")) << again.output;
}

TEST(Sweep, InterruptedSweepResumesAndRedoesOnlyWhatWasMissing) {
  Fixture f("resume", R"(
[base]
task = "probe"
world = 2
threads = 1
steps = 25
warmup = 1
"probe.sleep_s" = 0.1
[axes]
"probe.elements" = [8, 16, 32]
)");
  const pid_t sweep = fork();
  ASSERT_GE(sweep, 0);
  if (sweep == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(SB_PROBE_EXE, SB_PROBE_EXE, "sweep", f.suite_file.c_str(), "--results",
          f.results.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Interrupt while point 1 is stepping (its log says it started; 25 steps take 2.5 s).
  const std::string log1 = sb::point_log_path(f.results, 1, f.suite.points[1].id);
  bool stepping = false;
  for (int i = 0; i < 1200 && !stepping; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stepping = f.summary(0).exists && contains(sb::tail_lines(log1, 50), "started, 25 total");
  }
  ASSERT_TRUE(stepping) << "point 1 never started stepping";
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const auto live = f.cli({"status", f.results});
  EXPECT_TRUE(contains(live.output, f.suite.points[1].id + " running     probe.elements=16  -- local sweep"))
      << live.output;
  kill(sweep, SIGTERM);
  int status = 0;
  waitpid(sweep, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_EQ(f.summary(0).status, "done");
  EXPECT_EQ(f.summary(1).status, "incomplete");  // stopped cleanly with a partial trace
  EXPECT_TRUE(contains(f.summary(1).failure_reason, "stopped by signal 10"))
      << f.summary(1).failure_reason;
  EXPECT_GT(f.summary(1).steps, 0);
  EXPECT_LT(f.summary(1).steps, 25);
  EXPECT_FALSE(f.summary(2).exists);
  const auto st = f.cli({"status", f.results});
  EXPECT_TRUE(contains(st.output, "1 done, 1 incomplete, 1 pending")) << st.output;

  struct stat before {};
  ASSERT_EQ(stat(f.path(0).c_str(), &before), 0);
  const auto r = f.cli({"sweep", f.suite_file, "--results", f.results});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "point 0 " + f.suite.points[0].id + " (probe.elements=8): skipped, done"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "2 ran, 1 skipped, 0 failed")) << r.output;
  struct stat after {};
  ASSERT_EQ(stat(f.path(0).c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "point 0 was redone";
  EXPECT_EQ(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec) << "point 0 was redone";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f.summary(i).status, "done") << i;
    EXPECT_EQ(f.summary(i).steps, 25) << i;
  }
}

TEST(Sweep, TimeLimitStopsThePointOrKillsItsLauncher) {
  Fixture f("limit", R"(
[base]
task = "probe"
world = 2
threads = 1
steps = 1000
warmup = 0
time_limit = 2
"probe.sleep_s" = 0.1
[axes]
"probe.ignore_stop" = [false, true]
)");
  const auto r = f.cli({"sweep", f.suite_file, "--results", f.results});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  // Cooperative: the point's watchdog stops it; the partial trace is kept, marked failed.
  EXPECT_EQ(f.summary(0).status, "failed");
  EXPECT_TRUE(contains(f.summary(0).failure_reason, "time limit of 2 s reached after "))
      << f.summary(0).failure_reason;
  EXPECT_GT(f.summary(0).steps, 0);
  EXPECT_LT(f.summary(0).steps, 1000);
  // Hung: the sweep kills the launcher's process group at the limit plus grace.
  EXPECT_EQ(f.summary(1).status, "failed");
  EXPECT_TRUE(contains(f.summary(1).failure_reason, "time limit of 2 s exceeded; launcher killed after "))
      << f.summary(1).failure_reason;
  // Nothing of the killed point is left running.
  const auto ps = sb::run_process({"pgrep", "-f", f.suite_file}, [] {
    sb::ProcessOptions po;
    po.capture_stdout = true;
    return po;
  }());
  EXPECT_EQ(ps.output, "") << "processes of the killed point survive";
}

TEST(Sweep, NpMaxSkipsPointsThatNeedMoreRanks) {
  Fixture f("npmax", R"(
[base]
task = "probe"
threads = 1
steps = 2
warmup = 0
[axes]
world = [1, 4]
)");
  const auto r = f.cli({"sweep", f.suite_file, "--results", f.results, "--np-max", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(f.summary(0).status, "done");
  EXPECT_FALSE(f.summary(1).exists);
  EXPECT_TRUE(contains(r.output, "skipped, needs 4 ranks and --np-max is 2")) << r.output;
  EXPECT_TRUE(contains(f.cli({"status", f.results}).output, "1 done, 1 pending"));
}

// `run` under mpirun, stopped by SIGUSR1 (as Slurm's pre-timeout signal arrives): a workload
// that throws when asked to stop leaves an incomplete result, not a failed one.
TEST(Run, StopSignalAnsweredByAnExceptionIsIncomplete) {
  Fixture f("throwstop", R"(
[base]
task = "probe"
world = 2
threads = 1
steps = 100
warmup = 0
"probe.sleep_s" = 0.1
"probe.throw_on_stop" = true
)");
  const std::string log = f.dir + "/run.log";
  const pid_t mpirun = fork();
  ASSERT_GE(mpirun, 0);
  if (mpirun == 0) {
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execlp(SB_MPIEXEC, SB_MPIEXEC, "--allow-run-as-root", "--oversubscribe", "-np", "2",
           SB_PROBE_EXE, "run", f.suite_file.c_str(), "--point", "0", "--results",
           f.results.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  bool started = false;
  for (int i = 0; i < 1200 && !started; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    started = contains(sb::tail_lines(log, 20), "started, 100 total");
  }
  ASSERT_TRUE(started) << sb::tail_lines(log, 20);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(mpirun, SIGUSR1);  // mpirun forwards it to the ranks
  int status = 0;
  waitpid(mpirun, &status, 0);
  const sb::ResultSummary s = f.summary(0);
  EXPECT_EQ(s.status, "incomplete") << s.failure_reason << "\n" << sb::tail_lines(log, 20);
  EXPECT_TRUE(contains(s.failure_reason, "stopped by signal 10 (User defined signal 1) after "))
      << s.failure_reason;
  EXPECT_TRUE(contains(s.failure_reason, "; the workload ended with: [rank ")) << s.failure_reason;
}

// One rank fails and aborts; the SIGTERM mpirun then sends makes the other rank end with an
// exception of its own ("the peer is gone"). The first failure is what the point records:
// neither that consequence nor an "incomplete -- stopped by signal 15" replaces it, and the
// sweep counts it failed (so later sweeps do not rerun it).
TEST(Sweep, FirstFailureWinsOverTheSignalThatEndsTheOthers) {
  Fixture f("firstfail", R"(
[base]
task = "probe"
world = 2
threads = 1
steps = 3
warmup = 0
"probe.fail_rank" = 1
"probe.wait_for_stop_rank" = 0
"probe.fail_step" = 1
)");
  const auto r = f.cli({"sweep", f.suite_file, "--results", f.results});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const sb::ResultSummary s = f.summary(0);
  EXPECT_EQ(s.status, "failed") << s.failure_reason;
  EXPECT_TRUE(contains(s.failure_reason, "probe.fail_rank: rank 1 fails at step 1"))
      << s.failure_reason;
  EXPECT_TRUE(contains(r.output, "1 ran, 0 skipped, 1 failed")) << r.output;
  // The other rank did get its signal and did try to record (the log says it kept the first).
  const std::string log = sb::tail_lines(sb::point_log_path(f.results, 0, f.suite.points[0].id), 60);
  EXPECT_TRUE(contains(log, "already records this run's first failure")) << log;
}

// An allocation that fails on one rank (a real std::bad_alloc: 1 PiB asked of operator new)
// is recorded as what ran out, where, the plan's estimate beside the limits, and the keys that
// lower it; not as "St9bad_alloc: std::bad_alloc".
TEST(Sweep, OutOfMemorySaysWhatRanOutWhereAndWhatToChange) {
  Fixture f("oom", R"(
[base]
task = "probe"
world = 2
threads = 1
steps = 3
warmup = 0
"probe.elements" = 8
"probe.oom_rank" = 1
)");
  const auto r = f.cli({"sweep", f.suite_file, "--results", f.results});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const sb::ResultSummary s = f.summary(0);
  EXPECT_EQ(s.status, "failed") << s.failure_reason;
  const std::string host = sb::host_name();
  EXPECT_TRUE(contains(s.failure_reason,
                       "[rank 1 on " + host + "] out of host memory in point 0 (oom), in step 1: "
                       "std::bad_alloc. For this point the plan estimates 64 B of model state per "
                       "rank (`shardbench plan`'s state/rank: weights, gradients and optimizer "
                       "state; activations and buffers come on top); the limits here: "))
      << s.failure_reason;
  EXPECT_TRUE(std::regex_search(s.failure_reason, std::regex("machine [0-9.]+ [KMGT]iB")))
      << s.failure_reason;
  EXPECT_TRUE(contains(s.failure_reason, ". Keys that lower it: probe.elements = 8 (lower it: "
                                         "fewer float64s per allreduce)."))
      << s.failure_reason;
  EXPECT_FALSE(contains(s.failure_reason, "St9bad_alloc")) << s.failure_reason;
}

// A rank the kernel's OOM killer ends (under a cgroup limit, as Slurm sets one) writes nothing:
// the sweep reads the cgroup's oom_kill count before and after the point and records the same
// message. The cgroup is a stand-in folder (SB_MEMORY_CGROUP) whose memory.events is a FIFO
// answering "oom_kill 0" to the read before the point and "oom_kill 1" to the one after; the
// rank is killed with SIGKILL, as the OOM killer does.
TEST(Sweep, ARankTheOomKillerEndedIsRecordedAsOutOfMemory) {
  Fixture f("oomkill", R"(
[base]
task = "probe"
world = 2
threads = 1
steps = 3
warmup = 0
"probe.elements" = 8
"probe.crash_rank" = 1
)");
  const std::string cgroup = f.dir + "/cgroup";
  fs::create_directories(cgroup);
  const std::string events = cgroup + "/memory.events";
  ASSERT_EQ(mkfifo(events.c_str(), 0600), 0);
  std::thread writer([&] {
    for (int kills : {0, 1}) {
      // Opens once the sweep opens it to read (no reader: ENXIO), for at most 2 minutes.
      int fd = -1;
      for (int i = 0; i < 2400 && fd < 0; ++i) {
        fd = open(events.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (fd < 0) return;
      const std::string text = fmt::format("oom 0\noom_kill {}\n", kills);
      EXPECT_EQ(write(fd, text.data(), text.size()), ssize_t(text.size()));
      close(fd);
      // The reader reads to the end and closes; the next message must reach the next read.
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  const auto r = f.cli({"sweep", f.suite_file, "--results", f.results},
                       {{"SB_MEMORY_CGROUP", cgroup}});
  writer.join();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const sb::ResultSummary s = f.summary(0);
  EXPECT_EQ(s.status, "failed") << s.failure_reason;
  EXPECT_EQ(s.failure_reason.rfind("out of host memory in point 0 (oomkill), on a rank (process "
                                   "rank 1 with PID ", 0), 0u)
      << s.failure_reason;
  EXPECT_TRUE(contains(s.failure_reason,
                       "the kernel's OOM killer ended 1 process in the memory cgroup " + cgroup +
                           " while the point ran (oom_kill 0 -> 1); launcher exit code "))
      << s.failure_reason;
  EXPECT_TRUE(contains(s.failure_reason, ". Keys that lower it: probe.elements = 8 (lower it: "
                                         "fewer float64s per allreduce)."))
      << s.failure_reason;
}

// A full disk while the result is written: the point is failed with the system's reason,
// which `status` shows; the sweep finishes cleanly (exit 1, no crash or HDF5 shutdown loop)
// and leaves neither temporaries nor a stale running.json. Needs root (mounts a tmpfs).
TEST(Sweep, FullDiskIsAFailedPointWithItsReason) {
  Fixture f("diskfull", R"(
[base]
task = "probe"
world = 1
threads = 1
steps = 400
warmup = 0
"probe.elements" = 8
)");
  const std::string mnt = f.dir + "/small";
  fs::create_directories(mnt);
  const auto m = sb::run_process({"mount", "-t", "tmpfs", "-o", "size=224k", "tmpfs", mnt}, {});
  if (!m.ok()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << m.describe();
  struct Unmount {
    std::string at;
    ~Unmount() { sb::run_process({"umount", "-l", at}, {}); }
  } unmount{mnt};
  const std::string results = mnt + "/results";
  // Ballast: leave about 112 KiB free, more than a failure record (every group's empty table
  // with its column attributes: 51 KB with the memory model's columns, more with the ranks'
  // mesh coordinates) and the point's log need, and less than the 400-step trace (270 KB).
  const auto fill = sb::run_process({"dd", "if=/dev/zero", "of=" + mnt + "/ballast", "bs=4k",
                                     "count=28"}, {});
  ASSERT_TRUE(fill.ok()) << fill.describe();
  const auto r = f.cli({"sweep", f.suite_file, "--results", results});
  EXPECT_EQ(r.term_signal, 0) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "1 ran, 0 skipped, 1 failed")) << r.output;
  EXPECT_FALSE(contains(r.output, "HDF5")) << r.output;
  const sb::ResultSummary s = sb::read_result_summary(sb::result_path(results, 0, f.suite.points[0].id));
  EXPECT_EQ(s.status, "failed") << s.failure_reason;
  EXPECT_TRUE(contains(s.failure_reason, "No space left on device")) << s.failure_reason;
  const auto st = f.cli({"status", results});
  EXPECT_TRUE(contains(st.output, "No space left on device")) << st.output;
  EXPECT_FALSE(fs::exists(results + "/running.json"));
  for (const auto& e : fs::directory_iterator(results + "/points"))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

// A step far longer than the time limit: the point's watchdog asks it to stop, but the step
// runs past the limit plus the sweep's grace, so the sweep's timeout signals the launcher too.
// The ranks still finish the step and write their partial trace, marked failed: the sweep
// keeps it (docs/HDF5_SCHEMA.md) instead of replacing it with a 0-step record.
TEST(Sweep, TimeLimitedPointKeepsItsPartialTraceWhenItsLauncherIsKilled) {
  Fixture f("slowstep", R"(
[base]
task = "probe"
world = 2
threads = 1
steps = 3
warmup = 0
time_limit = 1
"probe.sleep_s" = 12
)");
  const auto r = f.cli({"sweep", f.suite_file, "--results", f.results});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const sb::ResultSummary s = f.summary(0);
  EXPECT_EQ(s.status, "failed") << s.failure_reason;
  EXPECT_TRUE(contains(s.failure_reason, "time limit of 1 s reached after 1 steps"))
      << s.failure_reason;
  EXPECT_EQ(s.steps, 1);
  const std::string log = sb::tail_lines(sb::point_log_path(f.results, 0, f.suite.points[0].id), 5);
  EXPECT_TRUE(contains(log, "killed after its time limit")) << log;  // the case under test
}
