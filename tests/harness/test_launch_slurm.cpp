// Job scripts for a real cluster and for the local one (issue 15, section 7), as text and
// without a cluster: the suite's [slurm] table becomes #SBATCH lines, --cpus-per-task is the
// threads each rank uses (separate arrays per thread count; threads = 0 refused), ranks are
// pinned (srun --cpu-bind, mpirun --map-by) and the local-only flags (run as root, oversubscribe,
// unbound) appear only with --local-cluster. A dry run leaves nothing `status` calls pending.
// Whole scripts are compared with tests/harness/data/trace/slurm-*.sbatch ("{dir}" and "{exe}"
// stand for the temporary folder and the probe; SB_UPDATE_EXPECTED=1 rewrites them).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "harness/core/subprocess.h"
#include "harness/launch/launcher.h"
#include "harness/launch/slurm.h"

namespace fs = std::filesystem;
using Argv = std::vector<std::string>;

namespace {
std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// A fresh folder per test; `suite.toml` in it holds `toml`.
struct Workdir {
  fs::path dir;
  explicit Workdir(const std::string& toml) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir = fs::temp_directory_path() /
          (std::string("sb-slurm-") + info->name() + "-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "suite.toml") << toml;
  }
  ~Workdir() { fs::remove_all(dir); }
  std::string results() const { return (dir / "res").string(); }
  std::string script(const std::string& name) const {
    return read(results() + "/slurm/" + name + ".sbatch");
  }
  // Runs the probe CLI: `shardbench_probe ARGS...`, output (stdout and stderr) and exit code.
  sb::ProcessResult probe(Argv args) const {
    // Through bash to read the errors (stderr) together with the output.
    args.insert(args.begin(), {"bash", "-c", "exec \"$0\" \"$@\" 2>&1", SB_PROBE_EXE});
    sb::ProcessOptions po;
    po.capture_stdout = true;
    return sb::run_process(args, po);
  }
  sb::ProcessResult submit(Argv extra) const {
    Argv a = {"submit", (dir / "suite.toml").string(), "--results", results(), "--dry-run"};
    a.insert(a.end(), extra.begin(), extra.end());
    return probe(a);
  }
};

// Compares with tests/harness/data/trace/<name> after replacing the machine's paths.
void expect_matches_file(std::string text, const Workdir& w, const std::string& name) {
  text = replace_all(replace_all(text, w.dir.string(), "{dir}"), SB_PROBE_EXE, "{exe}");
  const std::string path = std::string(SB_TEST_DATA) + "/trace/" + name;
  if (const char* u = std::getenv("SB_UPDATE_EXPECTED"); u && std::string(u) == "1") {
    std::ofstream(path) << text;
    return;
  }
  std::string expected = read(path);
  // The local cluster runs the job as the user who submits: the flag only when that is root.
  if (geteuid() != 0) expected = replace_all(expected, "--allow-run-as-root ", "");
  EXPECT_EQ(text, expected) << "differs from " << path;
}

const char* kClusterSuite = R"toml([suite]
name = "cluster"
[base]
task = "probe"
steps = 2
warmup = 0
time_limit = 120
threads = 4
[axes]
world = [4, 2]
[slurm]
account = "proj-42"
qos = "normal"
partition = "gpu,gpu-long"
gres = "gpu:a100:4"
nodes = 2
constraint = "a100&ib"
time = "1-02:30:00"
extra = ["#SBATCH --mail-type=END,FAIL", "#SBATCH --exclusive"]
)toml";
}  // namespace

TEST(JobLaunch, RealClusterPinsRanksWithoutLocalFlags) {
  const sb::SlurmSite real;
  EXPECT_EQ(sb::job_launch_prefix("mpirun", {4, 2, true}, real),
            (Argv{"mpirun", "--map-by", "slot:PE=2", "--bind-to", "core", "-np", "4", "-x",
                  "OMP_NUM_THREADS=2"}));
  EXPECT_EQ(sb::job_launch_prefix("srun", {3, 4, true}, real),
            (Argv{"srun", "--mpi=pmix", "--ntasks=3", "--cpus-per-task=4", "--cpu-bind=cores",
                  "--kill-on-bad-exit=1", "--export=ALL,OMP_NUM_THREADS=4"}));
}

TEST(JobLaunch, LocalClusterKeepsTheWorkstationFlags) {
  sb::SlurmSite local;
  local.local_cluster = true;
  for (const char* l : {"mpirun", "srun"})
    EXPECT_EQ(sb::job_launch_prefix(l, {4, 2, true}, local),
              sb::find_launcher(l)->prefix({4, 2, true}));
  EXPECT_EQ(sb::job_launch_prefix("mpirun", {4, 2, true}, local),
            (Argv{"mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np",
                  "4", "-x", "OMP_NUM_THREADS=2"}));
}

TEST(SubmitRealCluster, FullSlurmTableScriptMatchesExpectedText) {
  const Workdir w(kClusterSuite);
  const auto r = w.submit({});
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  expect_matches_file(w.script("cluster-w4"), w, "slurm-real-cluster-w4.sbatch");
  const std::string w2 = w.script("cluster-w2");
  EXPECT_NE(w2.find("#SBATCH --ntasks=2\n#SBATCH --cpus-per-task=4\n#SBATCH --time=26:30:00\n"),
            std::string::npos) << w2;
  EXPECT_NE(w2.find("\nmpirun --map-by slot:PE=4 --bind-to core -np 2 -x OMP_NUM_THREADS=4 "),
            std::string::npos) << w2;
  for (const std::string& text : {w.script("cluster-w4"), w2})
    for (const char* local_only : {"--allow-run-as-root", "--oversubscribe", "--bind-to none"})
      EXPECT_EQ(text.find(local_only), std::string::npos) << local_only;
}

TEST(SubmitRealCluster, SrunAndFlagsOverTheTable) {
  const Workdir w(kClusterSuite);
  const auto r = w.submit({"--launcher", "srun", "--partition", "debug", "--time-min", "30"});
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  const std::string s = w.script("cluster-w4");
  EXPECT_NE(s.find("\nsrun --mpi=pmix --ntasks=4 --cpus-per-task=4 --cpu-bind=cores "
                   "--kill-on-bad-exit=1 --export=ALL,OMP_NUM_THREADS=4 \"$sb_exe\" run "),
            std::string::npos) << s;
  // The command line wins over the suite for partition and time.
  EXPECT_NE(s.find("\n#SBATCH --time=0:30:00\n"), std::string::npos) << s;
  EXPECT_NE(s.find("\n#SBATCH --partition=debug\n#SBATCH --account=proj-42\n"), std::string::npos)
      << s;
}

TEST(SubmitLocalCluster, ScriptMatchesExpectedText) {
  // As the slurm tests' suites: threads = 0 is allowed here and asks for one CPU.
  const Workdir w("[suite]\nname = \"local\"\n[base]\ntask = \"probe\"\nworld = 2\n"
                  "steps = 2\nwarmup = 0\ntime_limit = 120\n");
  const auto r = w.submit({"--local-cluster"});
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  expect_matches_file(w.script("local-w2"), w, "slurm-local-cluster-w2.sbatch");
}

TEST(SubmitRealCluster, EachThreadCountGetsItsOwnArray) {
  // One --cpus-per-task per array: points on 2 ranks with 1 and 3 threads are two arrays, each
  // asking for exactly what its ranks use (not the largest for all).
  const Workdir w("[suite]\nname = \"mix\"\n[base]\ntask = \"probe\"\nsteps = 2\nwarmup = 0\n"
                  "time_limit = 120\n[axes]\nworld = [2, 1]\nthreads = [1, 3]\n");
  const auto r = w.submit({});
  ASSERT_TRUE(r.ok()) << r.describe() << "\n" << r.output;
  // Points: 0 w2/t1, 1 w2/t3, 2 w1/t1, 3 w1/t3.
  const struct {
    const char* tag;
    int array, world, threads;
  } want[] = {{"w2-t1", 0, 2, 1}, {"w2-t3", 1, 2, 3}, {"w1-t1", 2, 1, 1}, {"w1-t3", 3, 1, 3}};
  for (const auto& x : want) {
    const std::string s = w.script(std::string("mix-") + x.tag);
    EXPECT_NE(s.find(fmt::format("\n#SBATCH --job-name=sb-mix-{}\n#SBATCH --array={}\n"
                                 "#SBATCH --ntasks={}\n#SBATCH --cpus-per-task={}\n",
                                 x.tag, x.array, x.world, x.threads)), std::string::npos)
        << x.tag << "\n" << s;
    EXPECT_NE(s.find(fmt::format("\nmpirun --map-by slot:PE={} --bind-to core -np {} -x "
                                 "OMP_NUM_THREADS={} ", x.threads, x.world, x.threads)),
              std::string::npos) << x.tag << "\n" << s;
  }
}

TEST(SubmitRealCluster, ThreadsZeroIsRefusedWithTheFix) {
  const Workdir w("[suite]\nname = \"zero\"\n[base]\ntask = \"probe\"\n[axes]\nworld = [2, 1]\n");
  const auto r = w.submit({});
  EXPECT_FALSE(r.ok()) << r.output;
  const std::string want =
      "2 points of zero (index 0, 1) leave threads at 0, the node's cores shared by its ranks, "
      "which is decided on the node after Slurm has allotted the CPUs: a job script cannot ask "
      "for the cores such a point uses. Set threads = N (cores per rank) in [base] of " +
      (w.dir / "suite.toml").string() + ", or vary it under [axes]; on the one-node cluster of "
      "jobscripts/local-cluster.sh pass --local-cluster";
  EXPECT_NE(r.output.find(want), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(w.results() + "/slurm")) << "a refused suite wrote scripts";
}

TEST(SubmitDryRun, StatusShowsNothingPending) {
  const Workdir w(kClusterSuite);
  ASSERT_TRUE(w.submit({}).ok());
  EXPECT_TRUE(fs::exists(w.results() + "/slurm/cluster-w4.sbatch"));
  EXPECT_FALSE(fs::exists(w.results() + "/manifest.json"));
  EXPECT_FALSE(fs::exists(w.results() + "/submissions.json"));
  const auto st = w.probe({"status", w.results()});
  ASSERT_TRUE(st.ok()) << st.describe() << "\n" << st.output;
  EXPECT_EQ(st.output, w.results() + ": nothing submitted; it holds only job scripts from "
                       "`shardbench submit --dry-run` (" + w.results() + "/slurm), so no point "
                       "is queued or pending. Submit without --dry-run to run them.\n");
}
