// Launchers and Slurm job scripts without a cluster: argv of each launcher, --array and
// --time syntax, the rendered sbatch scripts compared as text with expected files
// (tests/harness/data/trace/*.sbatch; SB_UPDATE_EXPECTED=1 rewrites them), the rendered script
// run by bash with stand-ins for the ranks and scontrol (which signal requeues), what happens
// after Slurm's pre-timeout signal (requeue or fail), squeue parsing, and `submit --dry-run`
// through the probe CLI (done points are not submitted again).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "harness/core/check.h"
#include "harness/core/subprocess.h"
#include "harness/launch/jobscript.h"
#include "harness/launch/launcher.h"
#include "harness/workload.h"
#include "harness/launch/slurm_queue.h"
#include "harness/launch/slurm_timeout.h"
#include "harness/spec/suite.h"
#include "harness/trace/result.h"

namespace fs = std::filesystem;
using Argv = std::vector<std::string>;

namespace {
std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Compares with tests/harness/data/trace/<name>, or rewrites it when SB_UPDATE_EXPECTED=1.
void expect_matches_file(const std::string& text, const std::string& name) {
  const std::string path = std::string(SB_TEST_DATA) + "/trace/" + name;
  if (const char* u = std::getenv("SB_UPDATE_EXPECTED"); u && std::string(u) == "1") {
    std::ofstream(path) << text;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " missing; run with SB_UPDATE_EXPECTED=1 and review";
  EXPECT_EQ(text, read(path)) << "differs from " << path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const sb::Error& e) {
    return e.what();
  }
  return "(no error)";
}

sb::JobScriptSpec fixed_spec() {
  sb::JobScriptSpec s;
  s.suite_name = "quickstart";
  s.suite_file = "/repo/suite/quickstart.toml";
  s.results_dir = "/scratch/results/quickstart";
  s.exe = "/opt/shardbench/bin/shardbench";
  s.world = 2;
  s.threads = 1;
  s.indices = {0, 1, 2, 3, 6};
  s.max_parallel = 2;
  s.time_min = 12;
  s.signal_s = 60;
  return s;
}
}  // namespace

TEST(Launchers, MpirunArgv) {
  sb::LaunchSpec s{4, 2, false};
  EXPECT_EQ(sb::find_launcher("mpirun")->prefix(s),
            (Argv{"mpirun", "--oversubscribe", "--bind-to", "none", "-np", "4", "-x",
                  "OMP_NUM_THREADS=2"}));
  s.as_root = true;
  EXPECT_EQ(sb::find_launcher("mpirun")->prefix(s)[1], "--allow-run-as-root");
}

TEST(Launchers, SrunArgv) {
  EXPECT_EQ(sb::find_launcher("srun")->prefix({3, 4, true}),
            (Argv{"srun", "--mpi=pmix", "--ntasks=3", "--cpus-per-task=4", "--kill-on-bad-exit=1",
                  "--export=ALL,OMP_NUM_THREADS=4"}));
}

TEST(Launchers, UnknownNameListsKnownOnes) {
  const std::string e = error_of([] { sb::find_launcher("aprun"); });
  EXPECT_NE(e.find("unknown launcher 'aprun'; known launchers: mpirun, srun"), std::string::npos) << e;
}

TEST(JobScript, ArraySpecAndTime) {
  EXPECT_EQ(sb::array_spec({0, 1, 2, 3, 5, 7, 8}, 2), "0-3,5,7-8%2");
  EXPECT_EQ(sb::array_spec({4}, 0), "4");
  EXPECT_EQ(sb::array_spec({1, 3}, 0), "1,3");
  EXPECT_EQ(sb::slurm_time(12), "0:12:00");
  EXPECT_EQ(sb::slurm_time(125), "2:05:00");
  const std::string e = error_of([] { sb::slurm_time(0); });
  EXPECT_NE(e.find("a Slurm time limit must be positive, got 0 minutes"), std::string::npos) << e;
}

TEST(JobScript, SrunScriptMatchesExpectedText) {
  sb::JobScriptSpec s = fixed_spec();
  s.launcher = "srun";
  s.launch_prefix = sb::find_launcher("srun")->prefix({2, 1, true});
  expect_matches_file(sb::render_job_script(sb::read_job_template("sbatch-array.sh.in"), s),
                      "quickstart-w2-srun.sbatch");
}

TEST(JobScript, MpirunScriptWithPartitionAndQuotedPathsMatchesExpectedText) {
  sb::JobScriptSpec s = fixed_spec();
  s.world = 4;
  s.threads = 2;
  s.indices = {4, 5};
  s.max_parallel = 0;
  s.partition = "debug";
  s.exe = "/home/a user/shard bench";    // needs quoting in the script body
  s.suite_file = "/repo/suite/it's.toml";  // a quote inside a quoted word
  s.launcher = "mpirun";
  s.launch_prefix = sb::find_launcher("mpirun")->prefix({4, 2, true});
  expect_matches_file(sb::render_job_script(sb::read_job_template("sbatch-array.sh.in"), s),
                      "quickstart-w4-mpirun.sbatch");
}

TEST(JobScript, ResultsFolderThatSbatchCannotExpressIsRefused) {
  sb::JobScriptSpec s = fixed_spec();
  s.results_dir = "/scratch/my results";
  s.launch_prefix = {"srun"};
  const std::string e = error_of([&] { sb::render_job_script("x", s); });
  EXPECT_NE(e.find("results folder '/scratch/my results' contains whitespace, a quote or a "
                   "backslash, which #SBATCH --output cannot express; choose another --results "
                   "folder"), std::string::npos) << e;
}

TEST(JobScript, UnknownPlaceholderIsAnError) {
  const std::string e = error_of([] { sb::render_job_script("a {{NOPE}} b", fixed_spec()); });
  EXPECT_NE(e.find("job script template: unknown placeholder {{NOPE}}"), std::string::npos) << e;
}

TEST(JobScript, ShellQuote) {
  EXPECT_EQ(sb::shell_quote("/a/b-c_d.e"), "/a/b-c_d.e");
  EXPECT_EQ(sb::shell_quote("a b"), "'a b'");
  EXPECT_EQ(sb::shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(sb::shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(sb::shell_quote(""), "''");
}

TEST(SlurmQueue, ParsesArrayTasksOnly) {
  const auto m = sb::parse_squeue("12_0|RUNNING\n12_3|PENDING\n13|RUNNING\n14_[5-7]|PENDING\ngarbage\n");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at({"12", 0}), "RUNNING");
  EXPECT_EQ(m.at({"12", 3}), "PENDING");
}

// `submit --dry-run` through the CLI: one script per world size, done points left out.
TEST(Submit, DryRunWritesOneArrayPerWorldSizeWithoutDonePoints) {
  const fs::path dir = fs::temp_directory_path() / ("sb-submit-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string suite = (dir / "mix.toml").string();
  // threads = 1: a real cluster's job asks for the cores each rank uses (0 is refused).
  std::ofstream(suite) << "[base]\ntask = \"probe\"\nsteps = 2\nwarmup = 0\ntime_limit = 120\n"
                          "threads = 1\n[axes]\nworld = [2, 1]\n\"probe.elements\" = [8, 16]\n";
  const std::string results = (dir / "res").string();
  // Points: 0 w2/8, 1 w2/16, 2 w1/8, 3 w1/16. Point 1 is done already.
  sb::ResultMeta done;
  done.status = "done";
  {
    sb::ProcessOptions po;
    po.capture_stdout = true;
    const auto plan = sb::run_process({SB_PROBE_EXE, "plan", suite}, po);
    ASSERT_TRUE(plan.ok()) << plan.output;
    std::istringstream ss(plan.output);
    std::string line;
    while (std::getline(ss, line)) {
      std::istringstream ls(line);
      std::string idx, id;
      ls >> idx >> id;
      if (idx == "1") sb::write_result_hdf5(sb::result_path(results, 1, id), done, sb::Recorder{});
    }
  }
  sb::ProcessOptions po;
  po.capture_stdout = true;
  const auto r = sb::run_process({SB_PROBE_EXE, "submit", suite, "--results", results,
                                  "--dry-run", "--max-parallel", "3", "--launcher", "srun"}, po);
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  EXPECT_NE(r.output.find("point 1 "), std::string::npos);
  EXPECT_NE(r.output.find(": skipped, done"), std::string::npos) << r.output;
  const std::string w2 = read(results + "/slurm/mix-w2.sbatch");
  const std::string w1 = read(results + "/slurm/mix-w1.sbatch");
  EXPECT_NE(w2.find("#SBATCH --array=0%3\n"), std::string::npos) << w2;
  EXPECT_NE(w2.find("#SBATCH --ntasks=2\n"), std::string::npos) << w2;
  EXPECT_NE(w1.find("#SBATCH --array=2-3%3\n"), std::string::npos) << w1;
  EXPECT_NE(w1.find("#SBATCH --ntasks=1\n"), std::string::npos) << w1;
  // 120 s limit + 60 s signal lead + 60 s start-up = 4 minutes.
  EXPECT_NE(w1.find("#SBATCH --time=0:04:00\n"), std::string::npos) << w1;
  EXPECT_NE(w1.find("srun --mpi=pmix --ntasks=1"), std::string::npos) << w1;
  EXPECT_NE(w1.find("#SBATCH --output=" + results + "/logs/%A_%a.out\n"), std::string::npos) << w1;
  EXPECT_FALSE(fs::exists(results + "/submissions.json")) << "a dry run submitted something";
  fs::remove_all(dir);
}

// ---- Signals: only Slurm's pre-timeout signal may requeue; a cancel ends the task -----------

namespace {
// Runs the rendered job script under bash as Slurm would (array task 7_0) with stand-ins: the
// launcher execs its arguments; `shardbench run` waits for a signal and exits 2 as stopped
// ranks do; `after-timeout` exits after_rc; scontrol only logs. `signal` goes to the batch
// shell once the "ranks" run.
// Returns the calls the script made, one per line, then "exit N".
std::string run_script_and_signal(const std::string& signal, int after_rc) {
  const fs::path dir = fs::temp_directory_path() /
                       fmt::format("sb-jobscript-{}-{}-{}", getpid(), signal, after_rc);
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  const std::string calls = (dir / "calls").string();
  auto stub = [&](const std::string& name, const std::string& body) {
    std::ofstream(dir / "bin" / name) << "#!/bin/bash\n" << body;
    fs::permissions(dir / "bin" / name, fs::perms::owner_all);
  };
  stub("launch", "exec \"$@\"\n");
  stub("scontrol", "echo \"scontrol $*\" >> " + calls + "\n");
  stub("shardbench",
       "case \"$1\" in\n"
       "  run) if [[ \" $* \" == *' --record-failure '* ]]; then\n"
       "         echo record-failure >> " + calls + "; exit 0; fi\n"
       "    trap 'echo \"ranks stopped by USR1\" >> " + calls + "; exit 2' USR1\n"
       "    trap 'echo \"ranks stopped by TERM\" >> " + calls + "; exit 2' TERM\n"
       "    touch " + (dir / "started").string() + "\n"
       "    while :; do sleep 0.05; done ;;\n"
       "  after-timeout) echo after-timeout >> " + calls + "; exit " +
           std::to_string(after_rc) + " ;;\n"
       "esac\n");
  sb::JobScriptSpec s = fixed_spec();
  s.results_dir = (dir / "res").string();
  s.exe = (dir / "bin" / "shardbench").string();
  s.launch_prefix = {(dir / "bin" / "launch").string()};
  fs::create_directories(dir / "res" / "logs");
  const std::string script = (dir / "job.sh").string();
  std::ofstream(script) << sb::render_job_script(sb::read_job_template("sbatch-array.sh.in"), s);
  // Only the batch shell is signalled: what the ranks get is then the script's doing.
  const std::string driver =
      "bash " + script + " > " + (dir / "out").string() + " 2>&1 & pid=$!; "
      "for i in $(seq 200); do [ -e " + (dir / "started").string() +
      " ] && break; sleep 0.05; done; "
      "kill -" + signal + " $pid; wait $pid; echo \"exit $?\" >> " + calls;
  sb::ProcessOptions po;
  po.timeout_s = 30;
  po.env = {{"PATH", (dir / "bin").string() + ":" + std::getenv("PATH")},
            {"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_JOB_ID", "7"}, {"SLURM_JOB_ID", "8"}};
  const auto r = sb::run_process({"bash", "-c", driver}, po);
  EXPECT_TRUE(r.ok()) << r.describe() << "\n" << read((dir / "out").string());
  const std::string out = read(calls);
  fs::remove_all(dir);
  return out;
}
}  // namespace

TEST(JobScript, CancelEndsTheTaskWithoutRequeue) {
  // Before: the TERM trap requeued the task, so scancel restarted it.
  const std::string calls = run_script_and_signal("TERM", 0);
  EXPECT_EQ(calls.find("scontrol"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("after-timeout"), std::string::npos) << calls;
  EXPECT_EQ(calls.find("record-failure"), std::string::npos) << calls;
  EXPECT_NE(calls.find("ranks stopped by TERM"), std::string::npos) << calls;
  EXPECT_NE(calls.find("exit 2"), std::string::npos) << calls;
}

TEST(JobScript, PreTimeoutSignalRequeuesOnlyWhenThePointResumes) {
  std::string calls = run_script_and_signal("USR1", 0);
  EXPECT_EQ(calls, "ranks stopped by USR1\nafter-timeout\nscontrol requeue 7_0\nexit 0\n");
  // Before: requeued whatever the point could do, so a point that restarts at step 0 looped.
  calls = run_script_and_signal("USR1", 1);
  EXPECT_EQ(calls, "ranks stopped by USR1\nafter-timeout\nexit 1\n");
}

namespace {
// A task that checkpoints as train does: its record names the folder a rerun resumes from
// (checkpoint_dir with resume = true), which is all the harness asks.
const sb::Registrar checkpointing_task([] {
  sb::TaskInfo t;
  t.task = "checkpointing";
  t.make = []() -> std::unique_ptr<sb::Workload> { return nullptr; };
  t.resume_dir = [](const sb::Point& p) {
    return p.get_bool("resume") ? p.get_string("checkpoint_dir") : std::string();
  };
  sb::register_task(std::move(t));
});

sb::Point timed_out_point(bool resume) {
  sb::Point p;
  p.index = 3;
  p.id = "abcd1234";
  for (const sb::KeySpec& ks : sb::registered_keys())  // the base keys every point has
    if (ks.tasks.empty()) p.set(ks.key, ks.default_value);
  p.set("task", std::string("checkpointing"));
  p.set("steps", std::int64_t{1000});
  p.set("checkpoint_dir", std::string(resume ? "/scratch/ckpt" : ""));
  p.set("resume", resume);
  return p;
}
sb::ResultSummary result(const std::string& status, std::int64_t steps) {
  sb::ResultSummary r;
  r.exists = true;
  r.status = status;
  r.steps = steps;
  return r;
}
}  // namespace

TEST(AfterTimeout, PointWithoutResumeFailsWithTheFix) {
  const auto d = sb::decide_after_timeout(timed_out_point(false), result("incomplete", 40),
                                          "0:01:00");
  EXPECT_EQ(d.action, sb::TimeoutDecision::Fail);
  EXPECT_EQ(d.reason, "stopped by Slurm's pre-timeout signal after 40 steps of 1000: the point "
                      "needs longer than the job's --time=0:01:00 and does not resume, so a "
                      "requeue would start again at step 0; give the job more time (a larger "
                      "time_limit, or `shardbench submit --time-min`), or set checkpoint_dir and "
                      "resume = true so that a requeued task continues from its last checkpoint");
  // A checkpoint_dir alone does not resume: the rerun would start at step 0 again.
  sb::Point p = timed_out_point(true);
  p.set("resume", false);
  EXPECT_EQ(sb::decide_after_timeout(p, result("incomplete", 40), "0:01:00").action,
            sb::TimeoutDecision::Fail);
  // No result at all (the launcher died): still a failure with the fix, never a requeue.
  EXPECT_EQ(sb::decide_after_timeout(p, sb::ResultSummary{}, "0:01:00").action,
            sb::TimeoutDecision::Fail);
}

TEST(AfterTimeout, ResumingPointIsRequeuedWhileItMakesProgress) {
  const sb::Point p = timed_out_point(true);
  EXPECT_EQ(sb::decide_after_timeout(p, result("incomplete", 40), "0:01:00").action,
            sb::TimeoutDecision::Requeue);
  // No step since the checkpoint: a requeue would be stopped at the same place again.
  const auto d = sb::decide_after_timeout(p, result("incomplete", 0), "0:01:00");
  EXPECT_EQ(d.action, sb::TimeoutDecision::Fail);
  EXPECT_NE(d.reason.find("before it completed a step since its checkpoint in /scratch/ckpt"),
            std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("give the job more time"), std::string::npos) << d.reason;
}

TEST(AfterTimeout, PointThatEndedOnItsOwnIsLeftAlone) {
  for (const char* st : {"done", "failed"})
    EXPECT_EQ(sb::decide_after_timeout(timed_out_point(true), result(st, 9), "0:01:00").action,
              sb::TimeoutDecision::Finished) << st;
}

TEST(AfterTimeout, FailureKeepsThePartialTrace) {
  const fs::path dir = fs::temp_directory_path() / ("sb-timeout-" + std::to_string(getpid()));
  fs::remove_all(dir);
  const sb::Point p = timed_out_point(false);
  const std::string path = sb::result_path(dir.string(), p.index, p.id);
  sb::ResultMeta m;
  m.status = "incomplete";
  m.failure_reason = "stopped by signal 10";
  sb::Recorder rec;
  for (std::int64_t i = 0; i < 3; ++i) {
    sb::StepRecord r;
    r.step = i;
    rec.step(r);
  }
  sb::write_result_hdf5(path, m, rec);
  sb::record_timeout_failure(dir.string(), sb::Suite{}, p, "too long for the job", "/x/7_0.out");
  const sb::ResultSummary s = sb::read_result_summary(path);
  EXPECT_EQ(s.status, "failed");
  EXPECT_EQ(s.failure_reason, "too long for the job\n(log: /x/7_0.out)");
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(std::distance(fs::directory_iterator(path.substr(0, path.rfind('/'))),
                          fs::directory_iterator{}), 1) << "a temporary file was left behind";
  fs::remove_all(dir);
}
