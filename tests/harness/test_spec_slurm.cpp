// The suite's [slurm] table (issue 15, section 7): a full table is read into Suite::slurm as
// written, Slurm's time formats are parsed exactly, and extra lines are limited to #SBATCH
// options shardbench does not write itself. The error texts of bad tables are in the bad-suite
// corpus (tests/harness/data/bad/slurm_*.toml).
#include <gtest/gtest.h>

#include "harness/spec/base_config.h"
#include "harness/spec/suite.h"
#include "tests/harness/test_spec_registry.h"

namespace sb {
namespace {

TEST(SlurmTable, FullTableIsReadAsWritten) {
  const Suite s = load_suite_text(R"toml([base]
world = 4
[slurm]
account = "proj-42"
qos = "normal"
partition = "gpu,gpu-long"
gres = "gpu:a100:4"
nodes = 2
constraint = "a100&(ib|roce)"
time = "1-02:30:00"
extra = ["#SBATCH --mail-type=END,FAIL", "#SBATCH --exclusive"]
)toml", "cluster.toml");
  EXPECT_EQ(s.slurm.account, "proj-42");
  EXPECT_EQ(s.slurm.qos, "normal");
  EXPECT_EQ(s.slurm.partition, "gpu,gpu-long");
  EXPECT_EQ(s.slurm.gres, "gpu:a100:4");
  EXPECT_EQ(s.slurm.nodes, 2);
  EXPECT_EQ(s.slurm.constraint, "a100&(ib|roce)");
  EXPECT_EQ(s.slurm.time, "1-02:30:00");
  EXPECT_EQ(s.slurm.time_s, 86400 + 2 * 3600 + 30 * 60);
  EXPECT_EQ(s.slurm.extra,
            (std::vector<std::string>{"#SBATCH --mail-type=END,FAIL", "#SBATCH --exclusive"}));
}

TEST(SlurmTable, AbsentTableIsEmptyAndDoesNotChangePointIds) {
  const std::string base = "[base]\nworld = 2\n";
  const Suite plain = load_suite_text(base, "a.toml");
  const Suite with = load_suite_text(base + "[slurm]\naccount = \"p\"\n", "a.toml");
  EXPECT_EQ(plain.slurm.account, "");
  EXPECT_EQ(plain.slurm.nodes, 0);
  EXPECT_EQ(plain.slurm.time_s, 0);
  EXPECT_TRUE(plain.slurm.extra.empty());
  // Where a suite runs is not part of what it measures.
  EXPECT_EQ(plain.points.at(0).id, with.points.at(0).id);
}

TEST(SlurmTable, TimeFormats) {
  EXPECT_EQ(slurm_time_seconds("90"), 90 * 60);         // minutes
  EXPECT_EQ(slurm_time_seconds("90:30"), 90 * 60 + 30);  // minutes:seconds
  EXPECT_EQ(slurm_time_seconds("2:00:00"), 7200);        // hours:minutes:seconds
  EXPECT_EQ(slurm_time_seconds("1-12"), 36 * 3600);      // days-hours
  EXPECT_EQ(slurm_time_seconds("1-0:30"), 86400 + 1800);
  EXPECT_EQ(slurm_time_seconds("2-00:00:01"), 2 * 86400 + 1);
  for (const char* bad : {"", "0", "0:00:00", "1:2:3:4", "1:60", "1-24", "-5", "1-", "a",
                          "1h", " 60", "366-00", "UNLIMITED", "1--2", "1:", ":30"})
    EXPECT_EQ(slurm_time_seconds(bad), -1) << '"' << bad << '"';
}

TEST(SlurmTable, ExtraLines) {
  EXPECT_EQ(slurm_extra_problem("#SBATCH --exclusive"), "");
  EXPECT_EQ(slurm_extra_problem("#SBATCH --mem=0"), "");
  EXPECT_EQ(slurm_extra_problem("#SBATCH --mail-user=a@b.org"), "");
  // -G is --gpus, not one of ours; --ntasks-per-node is not --ntasks.
  EXPECT_EQ(slurm_extra_problem("#SBATCH -G 4"), "");
  EXPECT_EQ(slurm_extra_problem("#SBATCH --ntasks-per-node=4"), "");
  for (const char* ours : {"#SBATCH --array=0-3", "#SBATCH -n 4", "#SBATCH --cpus-per-task=8",
                           "#SBATCH -c8", "#SBATCH -t 60", "#SBATCH --output=x",
                           "#SBATCH --no-requeue", "#SBATCH -p debug", "#SBATCH --gres=gpu:1",
                           "#SBATCH -N 2", "#SBATCH -C a100", "#SBATCH -J name"})
    EXPECT_NE(slurm_extra_problem(ours).find("which shardbench writes itself"), std::string::npos)
        << ours;
  for (const char* bad : {"#SBATCH", "#SBATCH ", "#SBATCH  --x", "#sbatch --x", "--exclusive",
                          "#SBATCH --x\n#SBATCH --y", "#SBATCH --x\r"})
    EXPECT_NE(slurm_extra_problem(bad), "") << bad;
}

}  // namespace
}  // namespace sb
