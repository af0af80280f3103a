// Mesh arithmetic (harness/core/mesh.h): placement (tp innermost, pp outermost), groups per
// dimension, colors, the data-parallel coordinate, and hybrid sharding's node-local default.
#include <gtest/gtest.h>

#include "harness/core/mesh.h"

namespace sb {
namespace {

Mesh mesh(int pp, int rep, int shard, int sp, int tp) {
  Mesh m;
  m.pp = pp, m.dp_replicate = rep, m.dp_shard = shard, m.sp = sp, m.tp = tp;
  return m;
}

TEST(Mesh, TpIsInnermostAndPpOutermost) {
  const Mesh m = mesh(2, 1, 2, 1, 2);  // 8 ranks
  EXPECT_EQ(m.world(), 8);
  // rank = (pp * 2 + dp_shard) * 2 + tp
  EXPECT_EQ(m.coords(5), (std::array<int, kMeshDims>{1, 0, 0, 0, 1}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(m.rank_of(m.coords(r)), r);
  EXPECT_EQ(m.group(5, {MeshDim::tp}), (std::vector<int>{4, 5}));
  EXPECT_EQ(m.group(5, {MeshDim::dp_shard}), (std::vector<int>{5, 7}));
  EXPECT_EQ(m.group(5, {MeshDim::pp}), (std::vector<int>{1, 5}));
  EXPECT_EQ(m.group(5, {MeshDim::dp_shard, MeshDim::tp}), (std::vector<int>{4, 5, 6, 7}));
}

TEST(Mesh, ColorsAreEqualExactlyWithinAGroup) {
  const Mesh m = mesh(1, 2, 2, 1, 2);
  for (int a = 0; a < m.world(); ++a)
    for (int b = 0; b < m.world(); ++b) {
      const auto g = m.group(a, {MeshDim::dp_shard});
      const bool same = std::find(g.begin(), g.end(), b) != g.end();
      EXPECT_EQ(m.color(a, {MeshDim::dp_shard}) == m.color(b, {MeshDim::dp_shard}), same);
    }
}

TEST(Mesh, HybridShardGroupsAreTodaysContiguousRanks) {
  // Today's hybrid_shard with shard_group 2 at world 4: shard groups {0,1} {2,3}, replica
  // groups {0,2} {1,3} (MPI_Comm_split(world, r / s) and (r % s)).
  const Mesh m = mesh(1, 2, 2, 1, 1);
  EXPECT_EQ(m.group(1, {MeshDim::dp_shard}), (std::vector<int>{0, 1}));
  EXPECT_EQ(m.group(1, {MeshDim::dp_replicate}), (std::vector<int>{1, 3}));
}

TEST(Mesh, DataParallelRankIgnoresTpAndPp) {
  const Mesh m = mesh(2, 1, 2, 1, 2);
  // Ranks that differ only in tp or pp read the same samples.
  EXPECT_EQ(m.dp_rank(0), m.dp_rank(1));
  EXPECT_EQ(m.dp_rank(0), m.dp_rank(4));
  EXPECT_NE(m.dp_rank(0), m.dp_rank(2));
  EXPECT_EQ(m.dp_size(), 2);
  const Mesh plain = mesh(1, 1, 4, 1, 1);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(plain.dp_rank(r), r);  // today's split: by world rank
}

TEST(Mesh, NodeLocalShardGroupResolvesAtLaunch) {
  Mesh m = mesh(1, 0, 0, 1, 1);
  EXPECT_FALSE(m.resolved());
  EXPECT_EQ(m.resolve_node_local(8, 4), "");
  EXPECT_EQ(m.dp_shard, 4);
  EXPECT_EQ(m.dp_replicate, 2);
  Mesh uneven = mesh(1, 0, 0, 1, 1);
  EXPECT_NE(uneven.resolve_node_local(6, 4).find("set mesh.dp_shard"), std::string::npos);
}

}  // namespace
}  // namespace sb
