// The harness's own registries (schedulers, launchers, commands, tasks, name sets) are
// Registry<Info>s: a duplicate name fails, an unknown one lists the known names, and each
// scheduler and launcher carries a record that callers ask. `sweep` and `submit` go through the
// scheduler registry: a scheduler registered here, in the test file, is the one they run.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "harness/command.h"
#include "harness/core/check.h"
#include "harness/launch/launcher.h"
#include "harness/launch/scheduler.h"
#include "harness/spec/suite.h"
#include "harness/workload.h"

namespace sb {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();  // without the file:line of the check
  }
  return "(no error)";
}

// What the test schedulers were asked to do: their name and the options they got.
struct Call {
  std::string scheduler, results_dir, launcher;
  int max_parallel = 0;
  bool dry_run = false, local_cluster = false;
  std::size_t points = 0;
};
std::vector<Call>& calls() {
  static std::vector<Call> c;
  return c;
}

class RecordingScheduler final : public Scheduler {
 public:
  explicit RecordingScheduler(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  int schedule(const Suite& suite, const ScheduleOptions& o) const override {
    calls().push_back({name_, o.results_dir, o.launcher, o.max_parallel, o.dry_run,
                       o.local_cluster, suite.points.size()});
    return 0;
  }
  std::map<std::int64_t, std::string> active_points(const std::string&,
                                                    std::string*) const override {
    return {};
  }

 private:
  std::string name_;
};

// A second cluster scheduler that has no job arrays and no test cluster; with it, `submit`
// without --scheduler has two to choose from. `sweep` still has one (local).
Registrar test_schedulers([] {
  SchedulerInfo q;
  q.make = [] { return std::unique_ptr<Scheduler>(new RecordingScheduler("testq")); };
  q.needs_cluster = true;
  q.job_time_limit = true;
  register_scheduler("testq", "test: a batch queue without arrays", std::move(q));
  register_task({"regtest", nullptr, nullptr});
});

// Runs `shardbench ARGS...` through the registered commands; returns the exit code.
int run_cli(std::vector<std::string> args) {
  CLI::App app{"shardbench"};
  app.require_subcommand(1);
  for (const auto& c : cli::commands()) c.setup(*app.add_subcommand(c.name, c.help));
  std::vector<const char*> argv{"shardbench"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(int(argv.size()), const_cast<char**>(argv.data()));
  } catch (const cli::Exit& e) {
    return e.code;
  }
  return 0;
}

// A two-point suite of the test task (world 1 and 2) with `extra_base` in its [base] table.
std::string suite_file(const std::string& extra_base = "") {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / fmt::format("sb-registries-{}", getpid());
  std::filesystem::create_directories(d);
  const std::string f = (d / "reg.toml").string();
  std::ofstream(f) << "[suite]\nname = \"reg\"\n\n[base]\ntask = \"regtest\"\n" << extra_base
                   << "\n[axes]\nworld = [1, 2]\n";
  return f;
}

// Unsets (or sets) an environment variable for one scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1); else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1); else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Schedulers, RecordsSayWhatEachCanDo) {
  const SchedulerInfo& local = scheduler_info("local");
  EXPECT_FALSE(local.needs_cluster);
  EXPECT_FALSE(local.job_arrays || local.job_time_limit || local.partitions ||
               local.local_cluster || local.allocates);
  const SchedulerInfo& slurm = scheduler_info("slurm");
  EXPECT_TRUE(slurm.needs_cluster && slurm.job_arrays && slurm.job_time_limit &&
              slurm.partitions && slurm.local_cluster && slurm.allocates);
  EXPECT_EQ(scheduler_names(), (std::vector<std::string>{"local", "slurm", "testq"}));
  EXPECT_EQ(find_scheduler("slurm")->name(), "slurm");
}

TEST(Schedulers, UnknownAndDuplicateNames) {
  EXPECT_NE(error_of([] { find_scheduler("pbs"); })
                .find("unknown scheduler 'pbs'; known schedulers: local, slurm, testq"),
            std::string::npos);
  EXPECT_NE(error_of([] { scheduler_info("pbs"); }).find("unknown scheduler 'pbs'"),
            std::string::npos);
  const std::string e = error_of([] {
    SchedulerInfo i;
    i.make = [] { return std::unique_ptr<Scheduler>(new RecordingScheduler("local")); };
    register_scheduler("local", "a second local", std::move(i));
  });
  EXPECT_NE(e.find("scheduler 'local' is registered twice (two files claim the name): rename one"),
            std::string::npos) << e;
  EXPECT_FALSE(scheduler_info("local").needs_cluster);  // the first registration stands
}

TEST(Schedulers, EachCommandChoosesByTheRecord) {
  EXPECT_EQ(choose_scheduler("", /*cluster=*/false), "local");
  EXPECT_EQ(choose_scheduler("testq", true), "testq");
  EXPECT_EQ(choose_scheduler("slurm", true), "slurm");
  std::string e = error_of([] { choose_scheduler("", true); });
  EXPECT_NE(e.find("more than one registered scheduler hands points to a cluster's queue "
                   "(`shardbench submit`): slurm, testq; choose one with --scheduler"),
            std::string::npos) << e;
  e = error_of([] { choose_scheduler("slurm", false); });
  EXPECT_NE(e.find("scheduler 'slurm' hands points to a cluster's queue (`shardbench submit`); "
                   "this command needs one that runs points on this machine (`shardbench "
                   "sweep`): local"), std::string::npos) << e;
  e = error_of([] { choose_scheduler("local", true); });
  EXPECT_NE(e.find("this command needs one that hands points to a cluster's queue (`shardbench "
                   "submit`): slurm, testq"), std::string::npos) << e;
}

TEST(Schedulers, SubmitRunsTheChosenSchedulerWithTheOptions) {
  calls().clear();
  const std::string suite = suite_file();
  EXPECT_EQ(run_cli({"submit", suite, "--scheduler", "testq", "--results", "/tmp/r",
                     "--launcher", "srun", "--dry-run", "--time-min", "5"}), 0);
  ASSERT_EQ(calls().size(), 1u);
  EXPECT_EQ(calls()[0].scheduler, "testq");
  EXPECT_EQ(calls()[0].results_dir, "/tmp/r");
  EXPECT_EQ(calls()[0].launcher, "srun");
  EXPECT_TRUE(calls()[0].dry_run);
  EXPECT_FALSE(calls()[0].local_cluster);
  EXPECT_EQ(calls()[0].points, 2u);
  std::filesystem::remove_all(std::filesystem::path(suite).parent_path());
}

TEST(Schedulers, SubmitRefusesWhatTheRecordSaysTheSchedulerCannotDo) {
  calls().clear();
  const std::string suite = suite_file();
  for (const auto& [flag, value, why] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"--max-parallel", "3", "--max-parallel (it submits no job arrays)"},
           {"--partition", "debug", "--partition (it has no partitions)"},
           {"--local-cluster", "", "--local-cluster (it has no one-node test cluster)"}}) {
    std::vector<std::string> args{"submit", suite, "--scheduler", "testq", flag};
    if (!value.empty()) args.push_back(value);
    const std::string e = error_of([&] { run_cli(args); });
    EXPECT_NE(e.find("scheduler 'testq' cannot honour " + why + "; leave the flag out"),
              std::string::npos) << e;
  }
  EXPECT_TRUE(calls().empty());
  std::filesystem::remove_all(std::filesystem::path(suite).parent_path());
}

TEST(Schedulers, SweepRefusesAClusterScheduler) {
  const std::string suite = suite_file();
  const std::string e = error_of([&] { run_cli({"sweep", suite, "--scheduler", "testq"}); });
  EXPECT_NE(e.find("scheduler 'testq' hands points to a cluster's queue"), std::string::npos) << e;
  std::filesystem::remove_all(std::filesystem::path(suite).parent_path());
}

// The local scheduler (sweep's by its record) asks the launcher's record whether it needs an
// allocation, and refuses before running anything outside one.
TEST(Schedulers, SweepRunsTheLocalSchedulerWhichRefusesALauncherThatNeedsAnAllocation) {
  const ScopedEnv outside("SLURM_JOB_ID", nullptr);
  const std::string suite = suite_file("launcher = \"srun\"\n");
  const std::string results = std::filesystem::path(suite).parent_path() / "results";
  const std::string e = error_of([&] { run_cli({"sweep", suite, "--results", results}); });
  EXPECT_NE(e.find("2 points (0, 1) cannot run here: launcher 'srun' starts ranks only inside "
                   "an allocation (SLURM_JOB_ID is not set): run this inside one, hand the "
                   "points to a cluster (`shardbench submit`), or set `launcher` to one that "
                   "needs none (mpirun)"), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(results + "/points"));  // refused before anything ran
  std::filesystem::remove_all(std::filesystem::path(suite).parent_path());
}

TEST(Launchers, AllocationFromTheRecords) {
  EXPECT_EQ(launcher_info("srun").allocation_env, "SLURM_JOB_ID");
  EXPECT_EQ(launcher_info("mpirun").allocation_env, "");
  {
    const ScopedEnv outside("SLURM_JOB_ID", nullptr);
    EXPECT_EQ(allocation_problem("mpirun", false), "");
    EXPECT_EQ(allocation_problem("srun", scheduler_info("slurm").allocates), "");
    EXPECT_NE(allocation_problem("srun", scheduler_info("local").allocates)
                  .find("launcher 'srun' starts ranks only inside an allocation"),
              std::string::npos);
  }
  const ScopedEnv inside("SLURM_JOB_ID", "42");  // a sweep inside salloc may use srun
  EXPECT_EQ(allocation_problem("srun", false), "");
  EXPECT_NE(error_of([] { allocation_problem("aprun", false); })
                .find("unknown launcher 'aprun'; known launchers: mpirun, srun"),
            std::string::npos);
}

TEST(Launchers, RecordsAndDuplicates) {
  EXPECT_EQ(launcher_info("mpirun").root_flag, "--allow-run-as-root");
  EXPECT_EQ(find_launcher("mpirun")->prefix({2, 1, true})[1], launcher_info("mpirun").root_flag);
  EXPECT_EQ(launcher_info("srun").root_flag, "");
  EXPECT_EQ(launcher_names(), (std::vector<std::string>{"mpirun", "srun"}));
  EXPECT_NE(error_of([] { launcher_info("aprun"); })
                .find("unknown launcher 'aprun'; known launchers: mpirun, srun"),
            std::string::npos);
  const std::string e = error_of([] {
    register_launcher("srun", "again", LauncherInfo{[] { return find_launcher("mpirun"); }, ""});
  });
  EXPECT_NE(e.find("launcher 'srun' is registered twice"), std::string::npos) << e;
  // The names are the `launcher` key's name set.
  std::vector<std::string> set;
  for (const auto& [n, doc] : registered_names("launcher")) set.push_back(n);
  EXPECT_EQ(set, launcher_names());
}

TEST(Commands, SortedAndADuplicateFails) {
  std::vector<std::string> names;
  for (const auto& c : cli::commands()) names.push_back(c.name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* c : {"plan", "run", "sweep", "submit", "status", "schema"})
    EXPECT_NE(std::find(names.begin(), names.end(), c), names.end()) << c;
  const std::string e = error_of([] { cli::register_command({"sweep", "again", nullptr}); });
  EXPECT_NE(e.find("command 'sweep' is registered twice"), std::string::npos) << e;
}

TEST(Commands, AnUnknownOneListsTheKnown) {
  std::string known;
  for (const auto& c : cli::commands()) known += (known.empty() ? "" : ", ") + c.name;
  EXPECT_EQ(error_of([] { cli::check_command("sweeep"); }),
            "unknown command 'sweeep'; known commands: " + known);
  EXPECT_EQ(error_of([] { cli::check_command("sweep"); }), "(no error)");
  EXPECT_EQ(error_of([] { cli::check_command("--help"); }), "(no error)");
}

// An unknown task or name is a suite error at plan (file:line:col, key), listing the known
// names of the set; the task registry's names are the `task` key's set.
TEST(NameSets, AnUnknownNameListsTheKnown) {
  const std::string suite = suite_file("launcher = \"aprun\"\n");
  const std::string e = error_of([&] { load_suite(suite); });
  // (a close name is suggested between the two: "did you mean 'mpirun'?")
  EXPECT_NE(e.find(":6:12: launcher: unknown launcher 'aprun': "), std::string::npos) << e;
  EXPECT_NE(e.find("known names are mpirun, srun"), std::string::npos) << e;
  std::ofstream(suite) << "[suite]\nname = \"reg\"\n\n[base]\ntask = \"nonesuch\"\n";
  const std::string t = error_of([&] { load_suite(suite); });
  EXPECT_NE(t.find(":5:8: task: unknown task 'nonesuch': known names are regtest"),
            std::string::npos) << t;
  std::filesystem::remove_all(std::filesystem::path(suite).parent_path());
}

TEST(Tasks, FoundByNameAndADuplicateFails) {
  ASSERT_NE(find_task("regtest"), nullptr);
  EXPECT_EQ(find_task("nonesuch"), nullptr);
  std::string e = error_of([] { register_task({"regtest", nullptr, nullptr}); });
  EXPECT_NE(e.find("task 'regtest' is registered twice"), std::string::npos) << e;
  bool in_set = false;
  for (const auto& [n, doc] : registered_names("task")) in_set |= n == "regtest";
  EXPECT_TRUE(in_set);
}

TEST(NameSets, ADuplicateNameFailsAndSetsStaySorted) {
  register_name("regtest_set", "b", "second");
  register_name("regtest_set", "a", "first");
  EXPECT_EQ(registered_names("regtest_set"),
            (std::vector<std::pair<std::string, std::string>>{{"a", "first"}, {"b", "second"}}));
  const std::string e = error_of([] { register_name("regtest_set", "a", "again"); });
  EXPECT_NE(e.find("'regtest_set' name 'a' is registered twice"), std::string::npos) << e;
  EXPECT_EQ(registered_names("regtest_set")[0].second, "first");
  EXPECT_TRUE(registered_names("no_such_set").empty());
}

}  // namespace
}  // namespace sb
