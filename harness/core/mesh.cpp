// Mesh arithmetic (mesh.h): coordinates, groups and colors as mixed-radix digits of a rank.
#include "harness/core/mesh.h"

#include <fmt/format.h>

#include "harness/core/check.h"

namespace sb {

const char* mesh_dim_name(MeshDim d) {
  switch (d) {
    case MeshDim::pp: return "pp";
    case MeshDim::dp_replicate: return "dp_replicate";
    case MeshDim::dp_shard: return "dp_shard";
    case MeshDim::sp: return "sp";
    case MeshDim::tp: return "tp";
  }
  return "?";
}

const std::array<MeshDim, kMeshDims>& mesh_dims() {
  static const std::array<MeshDim, kMeshDims> d = {MeshDim::pp, MeshDim::dp_replicate,
                                                   MeshDim::dp_shard, MeshDim::sp, MeshDim::tp};
  return d;
}

int Mesh::size(MeshDim d) const {
  switch (d) {
    case MeshDim::pp: return pp;
    case MeshDim::dp_replicate: return dp_replicate;
    case MeshDim::dp_shard: return dp_shard;
    case MeshDim::sp: return sp;
    case MeshDim::tp: return tp;
  }
  return 1;
}

std::string Mesh::resolve_node_local(int world, int ranks_per_node) {
  if (resolved()) return "";
  const int others = pp * sp * tp;
  if (ranks_per_node < 1 || ranks_per_node % others != 0 || world % ranks_per_node != 0)
    return fmt::format("the shard group is the ranks of a node (mesh.dp_shard unset with "
                       "hybrid_shard), but {} ranks per node of {} do not split into shard "
                       "groups of whole nodes with pp x sp x tp = {}; set mesh.dp_shard "
                       "(or shard_group) explicitly", ranks_per_node, world, others);
  dp_shard = ranks_per_node / others;
  dp_replicate = world / (pp * dp_shard * sp * tp);
  return "";
}

std::array<int, kMeshDims> Mesh::coords(int rank) const {
  SB_CHECK(resolved() && rank >= 0 && rank < world(), "rank {} outside mesh {}", rank, str());
  std::array<int, kMeshDims> c{};
  for (int i = kMeshDims - 1; i >= 0; --i) {  // innermost (tp) is the fastest digit
    const int n = size(mesh_dims()[i]);
    c[i] = rank % n;
    rank /= n;
  }
  return c;
}

int Mesh::rank_of(const std::array<int, kMeshDims>& c) const {
  int r = 0;
  for (int i = 0; i < kMeshDims; ++i) r = r * size(mesh_dims()[i]) + c[i];
  return r;
}

namespace {
bool among(MeshDim d, const std::vector<MeshDim>& dims) {
  for (MeshDim x : dims)
    if (x == d) return true;
  return false;
}
}  // namespace

std::vector<int> Mesh::group(int rank, const std::vector<MeshDim>& dims) const {
  const auto mine = coords(rank);
  std::vector<int> out;
  for (int r = 0; r < world(); ++r) {
    const auto c = coords(r);
    bool same = true;
    for (int i = 0; i < kMeshDims && same; ++i)
      same = among(mesh_dims()[i], dims) || c[i] == mine[i];
    if (same) out.push_back(r);
  }
  return out;
}

int Mesh::color(int rank, const std::vector<MeshDim>& dims) const {
  auto c = coords(rank);
  for (int i = 0; i < kMeshDims; ++i)
    if (among(mesh_dims()[i], dims)) c[i] = 0;  // the group's first member names it
  return rank_of(c);
}

std::vector<int> Mesh::expert_group(int rank, bool parallel) const {
  const auto shard = group(rank, {MeshDim::dp_shard, MeshDim::sp});
  const int n = static_cast<int>(shard.size());
  const int e = ep < 1 ? 1 : ep;
  int i = 0;
  while (i < n && shard[static_cast<std::size_t>(i)] != rank) ++i;
  std::vector<int> out;
  for (int j = 0; j < n; ++j)
    if (parallel ? j / e == i / e : j % e == i % e) out.push_back(shard[static_cast<std::size_t>(j)]);
  return out;
}

int Mesh::dp_rank(int rank) const {
  const auto c = coords(rank);
  return c[int(MeshDim::dp_replicate)] * dp_shard + c[int(MeshDim::dp_shard)];
}

std::string Mesh::str() const {
  return fmt::format("pp={} dp_replicate={} dp_shard={} sp={} tp={} ep={}", pp, dp_replicate,
                     dp_shard, sp, tp, ep);
}

}  // namespace sb
