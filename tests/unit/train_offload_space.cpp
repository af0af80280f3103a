// plan's room check for offload files (workloads/train/train_task.cpp offload_space_problem):
// nothing when they fit; otherwise the folder, every part of the need (and checkpoint sets
// only when they share the file system) and the fix.
#include <gtest/gtest.h>

#include "workloads/train/train_workload.h"

using sb::train::offload_space_problem;

namespace {
constexpr std::uint64_t GiB = std::uint64_t{1} << 30;
}

TEST(OffloadSpace, NothingWhenTheFilesFit) {
  EXPECT_EQ(offload_space_problem("/d", 10 * GiB, 10 * GiB, 4 * GiB, 1 * GiB, 0, 2), "");
}

TEST(OffloadSpace, NamesEachPartAndTheFix) {
  const std::string m = offload_space_problem("/d", 10 * GiB, 9 * GiB, 4 * GiB, 1 * GiB, 0, 2);
  EXPECT_EQ(m, "offload to '/d' needs 10.00 GiB of free disk (2 ranks x (4.00 GiB of optimizer "
               "state + 1.00 GiB of key/value chunks), as if every rank were on this node) and it "
               "has 9.00 GiB free; set offload_dir to a larger file system, or shard more "
               "(strategy, mesh.dp_shard)");
}

TEST(OffloadSpace, CountsCheckpointSetsOnTheSameFileSystem) {
  const std::string m = offload_space_problem("/d", 18 * GiB, 9 * GiB, 4 * GiB, 0, 5 * GiB, 2);
  EXPECT_NE(m.find("needs 18.00 GiB of free disk (2 ranks x (4.00 GiB of optimizer state + 0.00 "
                   "GiB of key/value chunks + 5.00 GiB of two checkpoint sets in checkpoint_dir, "
                   "on the same file system)"), std::string::npos) << m;
  EXPECT_NE(m.find("set offload_dir to a larger file system or checkpoint_dir to another one, or "
                   "shard more"), std::string::npos) << m;
}
