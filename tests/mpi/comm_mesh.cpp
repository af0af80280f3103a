// The communicator's groups from a process mesh (harness/core/mesh.h): the shard and replica
// groups are exactly the mesh's groups over dp_shard and dp_replicate (members and ranks
// within them), equal to the groups shard_group built; a node-local mesh (both sizes 0)
// resolves to a node's ranks; a mesh whose product is not the world fails on every rank
// before anything is sent; each rank's coordinates reach its memory record. The tp, pp and sp
// groups are the mesh's groups over those dimensions.
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

double members_sum(const sb::Mesh& m, int rank, const std::vector<sb::MeshDim>& dims) {
  const auto g = m.group(rank, dims);
  return std::accumulate(g.begin(), g.end(), 0.0);
}
double members_sum(const sb::Mesh& m, int rank, sb::MeshDim d) {
  return members_sum(m, rank, std::vector<sb::MeshDim>{d});
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

// Meshes with tensor, pipeline and sequence dimensions: each Group is exactly the mesh's
// group over its dimension (size, rank within it, members by an all-reduce of world ranks;
// the shard group spans dp_shard and sp, whose ranks share parameters: sp inner),
// and a point-to-point transfer on the pp group reaches the next stage, traced with dim pp.
TEST(CommMesh, TpPpSpGroupsAreTheMeshsGroups) {
  const int n = world_size(), r = world_rank();
  std::vector<sb::Mesh> meshes;
  sb::Mesh a;
  a.tp = n;
  meshes.push_back(a);
  sb::Mesh b;
  if (n % 2 == 0) b.pp = 2, b.tp = n / 2;
  else b.sp = n;
  meshes.push_back(b);
  sb::Mesh c4;
  if (n == 4) c4.pp = 2, c4.dp_shard = 2;
  else c4.pp = n;
  meshes.push_back(c4);
  const std::pair<Group, sb::MeshDim> dims[] = {
      {Group::Replica, sb::MeshDim::dp_replicate},
      {Group::Tp, sb::MeshDim::tp}, {Group::Pp, sb::MeshDim::pp}, {Group::Sp, sb::MeshDim::sp}};
  for (const sb::Mesh& m : meshes) {
    Communicator c(MPI_COMM_WORLD, m);
    const auto xy = m.coords(r);
    EXPECT_EQ(c.size(Group::Shard), m.dp_shard * m.sp) << m.str();
    EXPECT_EQ(c.rank(Group::Shard), xy[int(sb::MeshDim::dp_shard)] * m.sp + xy[int(sb::MeshDim::sp)]) << m.str();
    EXPECT_EQ(rank_sum(c, Group::Shard), members_sum(m, r, {sb::MeshDim::dp_shard, sb::MeshDim::sp})) << m.str();
    for (const auto& [g, d] : dims) {
      EXPECT_EQ(c.size(g), m.size(d)) << m.str() << " " << sb::comm::group_name(g);
      EXPECT_EQ(c.rank(g), xy[int(d)]) << m.str() << " " << sb::comm::group_name(g);
      EXPECT_EQ(rank_sum(c, g), members_sum(m, r, d)) << m.str() << " " << sb::comm::group_name(g);
    }
    if (m.pp < 2) continue;
    std::vector<sb::CommEvent> events;
    c.set_trace_hook([&](const sb::CommEvent& e) { events.push_back(e); }, MPI_Wtime());
    const int stage = c.rank(Group::Pp), stages = c.size(Group::Pp);
    auto got = torch::full({3}, -1.0);
    sb::comm::Request rq;
    if (stage > 0) rq = c.recv_async(got, stage - 1, Group::Pp, "pp_activation");
    if (stage + 1 < stages)
      c.send(torch::full({3}, static_cast<double>(r)), stage + 1, Group::Pp, "pp_activation");
    rq.wait();
    if (stage > 0) {
      auto prev = xy;
      prev[int(sb::MeshDim::pp)] -= 1;
      EXPECT_EQ(got[0].item<double>(), m.rank_of(prev)) << m.str();
    }
    c.set_trace_hook(nullptr, 0);
    for (const auto& e : events) {
      EXPECT_EQ(e.dim, "pp");
      EXPECT_EQ(e.group, "pp");
    }
    EXPECT_EQ(events.size(), static_cast<std::size_t>((stage > 0) + (stage + 1 < stages)));
  }
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
