// The process mesh: how a point's ranks are laid out over named parallel dimensions
// (torchtitan's DeviceMesh, Megatron's parallel state), as pure arithmetic on rank numbers.
// Dimensions, outermost first: pp, dp_replicate, dp_shard, sp, tp (tp innermost, so a tensor-
// parallel group is contiguous ranks, on one node where the node holds it; as Megatron and
// torchtitan place them). ep is not a factor of its own: expert parallelism borrows
// data-parallel ranks, so ep divides dp_shard x sp (DeepSpeed-MoE, Megatron, torchtitan).
//
//   rank = ((((pp_i * R + r_i) * S + s_i) * Q + q_i) * T + t_i)      (R dp_replicate, S dp_shard,
//                                                                     Q sp, T tp)
#pragma once
#include <array>
#include <string>
#include <vector>

namespace sb {

enum class MeshDim { pp = 0, dp_replicate, dp_shard, sp, tp };
constexpr int kMeshDims = 5;
// "pp", "dp_replicate", ... in placement order (outermost first).
const char* mesh_dim_name(MeshDim d);
const std::array<MeshDim, kMeshDims>& mesh_dims();

struct Mesh {
  // Sizes; a size of 0 for dp_shard and dp_replicate means "the ranks of a node" (hybrid
  // sharding's default), resolved at launch by resolve_node_local().
  int pp = 1, dp_replicate = 1, dp_shard = 1, sp = 1, tp = 1;
  int ep = 1;  // divides dp_shard * sp; not a factor of world

  int size(MeshDim d) const;
  int world() const { return pp * dp_replicate * dp_shard * sp * tp; }
  bool resolved() const { return dp_shard > 0 && dp_replicate > 0; }
  // dp_shard = 0 (and dp_replicate = 0): the shard group is the ranks of a node, the replicas
  // the rest; every other size as given. "" or what is wrong (uneven nodes).
  std::string resolve_node_local(int world, int ranks_per_node);

  // This rank's coordinate along each dimension.
  std::array<int, kMeshDims> coords(int rank) const;
  int rank_of(const std::array<int, kMeshDims>& c) const;
  // The ranks that differ from `rank` only along `dims` (in rank order, `rank` among them):
  // the members of the group a collective over those dimensions runs on.
  std::vector<int> group(int rank, const std::vector<MeshDim>& dims) const;
  // A group's color for MPI_Comm_split: equal for exactly the ranks of one group over dims.
  int color(int rank, const std::vector<MeshDim>& dims) const;
  // Expert parallelism's two groups inside the shard group (dp_shard x sp, in rank order; i
  // this rank's place in it): the expert-parallel group, ep consecutive members (the same
  // i / ep: DeepSpeed-MoE's and Megatron's placement, so an all-to-all stays on a node), and
  // the expert-data-parallel group (the same i % ep: the ranks that hold the same experts and
  // sum their gradients). parallel: which one. The group's first member names its color.
  std::vector<int> expert_group(int rank, bool parallel) const;

  // The data-parallel coordinate: which slice of the global batch this rank reads. Ranks that
  // differ only in tp, pp or sp see the same samples.
  int dp_rank(int rank) const;
  int dp_size() const { return dp_replicate * dp_shard; }

  // "pp=1 dp_replicate=1 dp_shard=4 sp=1 tp=1 ep=1"
  std::string str() const;
};

}  // namespace sb
