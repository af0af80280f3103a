// Guards of the measurement (issue "Trust" 2): the local sweep refuses points whose ranks x
// threads exceed the machine's cores unless told --allow-oversubscribe (then it warns and the
// result records the machine: cores, ranks per node, load averages), and one results folder
// takes one sweep at a time (a lock with the holder's pid and host; a dead holder's lock is
// taken over with a message). Each rank also keeps its own log, and `status` shows a running
// point's step and ETA (and --json). Real runs of the probe workload under mpirun.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <nlohmann/json.hpp>

#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "harness/core/subprocess.h"

namespace fs = std::filesystem;

namespace {

struct Guard {
  std::string dir, suite, results;
  explicit Guard(const std::string& name, const std::string& toml) {
    dir = (fs::temp_directory_path() / fmt::format("sb-guard-{}-{}", name, getpid())).string();
    fs::remove_all(dir);
    fs::create_directories(dir);
    suite = dir + "/" + name + ".toml";
    std::ofstream(suite) << toml;
    results = dir + "/results";
  }
  ~Guard() { fs::remove_all(dir); }
  // stdout and stderr together.
  sb::ProcessResult sweep(const std::string& extra = "") const {
    sb::ProcessOptions po;
    po.capture_stdout = true;
    const std::string cmd = fmt::format("{} sweep {} --results {} {} 2>&1", sb::shell_quote(SB_PROBE_EXE),
                                        sb::shell_quote(suite), sb::shell_quote(results), extra);
    return sb::run_process({"/bin/sh", "-c", cmd}, po);
  }
  std::vector<fs::path> result_files() const {
    std::vector<fs::path> out;
    if (fs::exists(results + "/points"))
      for (const auto& e : fs::directory_iterator(results + "/points")) out.push_back(e.path());
    return out;
  }
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string root_attr(const fs::path& file, const char* name) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  const hid_t t = H5Aget_type(a);
  char* p = nullptr;
  H5Aread(a, t, &p);
  std::string v = p ? p : "";
  H5free_memory(p);
  H5Tclose(t);
  H5Aclose(a);
  H5Fclose(f);
  return v;
}

// A suite whose 2 ranks each want all of this machine's cores: 2x oversubscribed anywhere.
std::string oversubscribed_suite() {
  return fmt::format(R"(
[base]
task = "probe"
world = 2
threads = {}
steps = 2
warmup = 0
)", sb::usable_cores());
}

}  // namespace

TEST(SweepGuard, OversubscribedPointsAreRefusedBeforeAnythingRuns) {
  Guard g("over", oversubscribed_suite());
  const auto r = g.sweep();
  EXPECT_NE(r.exit_code, 0) << r.output;
  const int cores = sb::usable_cores();
  EXPECT_TRUE(contains(r.output, fmt::format("1 point of suite over need more threads than this "
                                             "machine's {} cores:", cores))) << r.output;
  EXPECT_TRUE(contains(r.output, fmt::format("2 ranks x {} threads = {} threads on {} cores (2.0x "
                                             "oversubscribed)", cores, 2 * cores, cores)))
      << r.output;
  EXPECT_TRUE(contains(r.output, "pass --allow-oversubscribe to run them anyway")) << r.output;
  EXPECT_TRUE(g.result_files().empty());
}

TEST(SweepGuard, AllowedOversubscriptionWarnsAndTheResultRecordsTheMachine) {
  Guard g("allowed", oversubscribed_suite());
  const auto r = g.sweep("--allow-oversubscribe");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: 1 point oversubscribe this machine's")) << r.output;
  const auto files = g.result_files();
  ASSERT_EQ(files.size(), 1u);
  const auto m = nlohmann::json::parse(root_attr(files[0], "machine"));
  EXPECT_EQ(m.at("ranks_per_node").get<int>(), 2);
  ASSERT_EQ(m.at("nodes").size(), 1u);
  const auto& node = m["nodes"][0];
  EXPECT_EQ(node.at("host").get<std::string>(), sb::host_name());
  EXPECT_EQ(node.at("ranks"), nlohmann::json::array({0, 1}));
  EXPECT_GE(node.at("cores").get<int>(), 1);
  EXPECT_FALSE(node.at("cpu_model").get<std::string>().empty());
  EXPECT_GE(node.at("loadavg_1m_start").get<double>(), 0.0);
  EXPECT_GE(node.at("loadavg_1m_end").get<double>(), 0.0);
  EXPECT_TRUE(node.at("isa").is_array());
  // Measured, so only their range is known: CPUs' worth of other work and of stolen time.
  EXPECT_GE(node.at("other_cpus").get<double>(), 0.0);
  EXPECT_LE(node.at("other_cpus").get<double>(), node.at("cores").get<double>() + 0.5);
  EXPECT_GE(node.at("steal_cpus").get<double>(), 0.0);
}

TEST(SweepGuard, ALiveSweepsLockRefusesASecondSweepOnTheFolder) {
  Guard g("locked", "[base]\ntask = \"probe\"\nworld = 1\nthreads = 1\nsteps = 1\nwarmup = 0\n");
  fs::create_directories(g.results);
  // This test process is alive on this host: as good a holder as a running sweep.
  std::ofstream(g.results + "/sweep.lock")
      << nlohmann::json{{"pid", getpid()}, {"host", sb::host_name()}, {"since", "then"}}.dump();
  const auto r = g.sweep();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, fmt::format("results folder {} is in use by another sweep (pid "
                                             "{}, host {}, since then;", g.results, getpid(),
                                             sb::host_name()))) << r.output;
  // The user's situation, said without the source line that found it.
  EXPECT_FALSE(contains(r.output, "results_lock.cpp")) << r.output;
  EXPECT_TRUE(g.result_files().empty());
  EXPECT_TRUE(fs::exists(g.results + "/sweep.lock"));  // not ours to remove
}

TEST(SweepGuard, ADeadSweepsLockIsTakenOverWithAMessage) {
  Guard g("stale", "[base]\ntask = \"probe\"\nworld = 1\nthreads = 1\nsteps = 1\nwarmup = 0\n");
  fs::create_directories(g.results);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // reaped: its pid names no process now
  std::ofstream(g.results + "/sweep.lock")
      << nlohmann::json{{"pid", child}, {"host", sb::host_name()}, {"since", "then"}}.dump();
  const auto r = g.sweep();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "taking over the stale lock " + g.results + "/sweep.lock"))
      << r.output;
  EXPECT_EQ(g.result_files().size(), 1u);
  EXPECT_FALSE(fs::exists(g.results + "/sweep.lock"));  // released at the end
}

// Per-rank logs (torchrun's rank<r>.log): what rank 1 printed when it failed is in its own
// file, not in rank 0's; the point log still interleaves both.
TEST(RankLogs, EachRankKeepsWhatItPrintedInItsOwnFile) {
  Guard g("ranklogs", R"(
[base]
task = "probe"
world = 2
threads = 1
steps = 3
warmup = 0
"probe.fail_rank" = 1
)");
  const auto r = g.sweep();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const auto files = g.result_files();
  ASSERT_EQ(files.size(), 1u);
  const std::string stem = files[0].stem().string();  // <index>-<id>
  const std::string dir = g.results + "/logs/" + stem;
  auto read = [](const std::string& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string r0 = read(dir + "/rank0.log"), r1 = read(dir + "/rank1.log");
  const std::string failure = "probe.fail_rank: rank 1 fails at step 1";
  EXPECT_TRUE(contains(r1, failure)) << r1;
  EXPECT_FALSE(contains(r0, failure)) << r0;
  EXPECT_TRUE(contains(read(g.results + "/logs/" + stem + ".log"), failure));
}

// `status --json` for scripts, and a running point's step and ETA from its progress file.
TEST(Status, JsonAndARunningPointsStepAndEta) {
  Guard g("statusjson", "[base]\ntask = \"probe\"\nworld = 1\nthreads = 1\nsteps = 2\nwarmup = 0\n");
  ASSERT_EQ(g.sweep().exit_code, 0);
  auto status = [&](const std::string& extra) {
    sb::ProcessOptions po;
    po.capture_stdout = true;
    std::vector<std::string> argv{SB_PROBE_EXE, "status", g.results};
    if (!extra.empty()) argv.push_back(extra);
    return sb::run_process(argv, po).output;
  };
  auto j = nlohmann::json::parse(status("--json"));
  EXPECT_EQ(j.at("counts").at("done").get<int>(), 1);
  ASSERT_EQ(j.at("points").size(), 1u);
  EXPECT_EQ(j["points"][0].at("state"), "done");
  EXPECT_EQ(j["points"][0].at("detail"), "2 steps");

  // The point again "running" under a live local sweep (this process), 3 of 10 steps done.
  const auto files = g.result_files();
  ASSERT_EQ(files.size(), 1u);
  const std::string stem = files[0].stem().string();
  const std::string id = stem.substr(stem.find('-') + 1);
  fs::remove(files[0]);
  std::ofstream(g.results + "/running.json")
      << nlohmann::json{{"pid", getpid()}, {"index", 0}, {"id", id}}.dump();
  std::ofstream(g.results + "/logs/" + stem + ".progress.json")
      << nlohmann::json{{"what", "probe"}, {"done", 3}, {"total", 10}, {"elapsed_s", 3.0},
                        {"eta_s", 7.0}, {"updated", 0}}.dump();
  EXPECT_TRUE(contains(status(""), "running     statusjson  -- local sweep, step 3/10, ETA 7.0s"))
      << status("");
  j = nlohmann::json::parse(status("--json"));
  EXPECT_EQ(j["points"][0].at("state"), "running");
  EXPECT_EQ(j["points"][0].at("progress").at("done").get<int>(), 3);
}

// `plan` estimates the suite's time here from its points already measured (seconds per step of
// each shape x steps), and prints no figure while nothing was measured.
TEST(PlanEstimate, FromTheDonePointsOfTheSuite) {
  Guard g("estimate", R"(
[base]
task = "probe"
world = 1
threads = 1
warmup = 0
[axes]
steps = [2, 4]
)");
  auto plan = [&] {
    sb::ProcessOptions po;
    po.capture_stdout = true;
    const std::string cmd = fmt::format("{} plan {} --results {} 2>&1", sb::shell_quote(SB_PROBE_EXE),
                                        sb::shell_quote(g.suite), sb::shell_quote(g.results));
    return sb::run_process({"/bin/sh", "-c", cmd}, po).output;
  };
  EXPECT_FALSE(contains(plan(), "time here")) << plan();  // nothing measured: no guess
  ASSERT_EQ(g.sweep().exit_code, 0);
  const std::string out = plan();
  EXPECT_TRUE(std::regex_search(out, std::regex("time here: about [0-9.]+s for all 2 points "
                                                "\\(from 2 done in ")))
      << out;
}
