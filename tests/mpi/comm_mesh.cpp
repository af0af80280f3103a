// The communicator's groups from a process mesh (harness/core/mesh.h): the shard and replica
// groups are exactly the mesh's groups over dp_shard and dp_replicate (members and ranks
// within them), equal to the groups shard_group built; a node-local mesh (both sizes 0)
// resolves to a node's ranks; a mesh whose product is not the world fails on every rank
// before anything is sent; each rank's coordinates reach its memory record.
#include <fmt/format.h>
#include <numeric>

#include "harness/trace/records.h"
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"

using namespace sbtest;
using sb::comm::Communicator;
using sb::comm::Group;

namespace {

sb::Mesh dp_mesh(int shard, int replicate) {
  sb::Mesh m;
  m.dp_shard = shard, m.dp_replicate = replicate;
  return m;
}

// The sum of world ranks over g, by an all-reduce on the communicator's group.
double rank_sum(Communicator& c, Group g) {
  auto t = torch::full({1}, static_cast<double>(c.rank()), torch::kFloat64);
  c.all_reduce(t, g);
  return t.item<double>();
}

double members_sum(const sb::Mesh& m, int rank, sb::MeshDim d) {
  const auto g = m.group(rank, {d});
  return std::accumulate(g.begin(), g.end(), 0.0);
}

TEST(CommMesh, GroupsAreTheMeshsGroups) {
  const int n = world_size(), r = world_rank();
  const int shard = n % 2 == 0 ? n / 2 : n;
  const sb::Mesh m = dp_mesh(shard, n / shard);
  Communicator c(MPI_COMM_WORLD, m);
  EXPECT_EQ(c.mesh().str(), m.str());
  const auto xy = m.coords(r);
  EXPECT_EQ(c.size(Group::Shard), shard);
  EXPECT_EQ(c.rank(Group::Shard), xy[int(sb::MeshDim::dp_shard)]);
  EXPECT_EQ(c.size(Group::Replica), n / shard);
  EXPECT_EQ(c.rank(Group::Replica), xy[int(sb::MeshDim::dp_replicate)]);
  EXPECT_EQ(rank_sum(c, Group::Shard), members_sum(m, r, sb::MeshDim::dp_shard));
  EXPECT_EQ(rank_sum(c, Group::Replica), members_sum(m, r, sb::MeshDim::dp_replicate));
  // shard_group's communicator: the same groups.
  Communicator old(MPI_COMM_WORLD, shard);
  EXPECT_EQ(old.mesh().str(), m.str());
  EXPECT_EQ(old.rank(Group::Shard), c.rank(Group::Shard));
  EXPECT_EQ(rank_sum(old, Group::Shard), rank_sum(c, Group::Shard));
  EXPECT_EQ(rank_sum(old, Group::Replica), rank_sum(c, Group::Replica));
}

TEST(CommMesh, NodeLocalMeshIsANodesRanks) {
  Communicator c(MPI_COMM_WORLD, dp_mesh(0, 0));  // the test's ranks share one node
  EXPECT_EQ(c.mesh().dp_shard, world_size());
  EXPECT_EQ(c.mesh().dp_replicate, 1);
  EXPECT_EQ(c.size(Group::Shard), world_size());
  EXPECT_EQ(c.size(Group::Replica), 1);
}

TEST(CommMesh, AMeshThatIsNotTheWorldFailsBeforeAnythingIsSent) {
  const int n = world_size();
  try {
    Communicator bad(MPI_COMM_WORLD, dp_mesh(n, 2));
    ADD_FAILURE() << "expected an error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format(
                  "the process mesh pp=1 dp_replicate=2 dp_shard={} sp=1 tp=1 ep=1 has {} ranks "
                  "but the world has {}", n, 2 * n, n)),
              std::string::npos)
        << e.what();
  }
}

TEST(CommMesh, EachRankRecordsItsCoordinates) {
  const int n = world_size(), r = world_rank();
  const int shard = n % 2 == 0 ? n / 2 : n;
  const sb::Mesh m = dp_mesh(shard, n / shard);
  const sb::RankMemory row = sb::rank_memory_now(r, m);
  EXPECT_EQ(row.rank, r);
  EXPECT_EQ(row.mesh_dp_shard, r % shard);
  EXPECT_EQ(row.mesh_dp_replicate, r / shard);
  EXPECT_EQ(row.mesh_pp + row.mesh_sp + row.mesh_tp, 0);
}

}  // namespace
