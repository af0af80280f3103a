// The process mesh's keys (mesh.dp_replicate, mesh.dp_shard, mesh.tp, mesh.pp, mesh.sp,
// mesh.ep: `mesh = { dp_shard = 2 }` in a suite flattens into them) as one typed section, and
// their canonical form: every point stores all six sizes and a world equal to their product,
// so equal meshes get one point id however they were written.
#pragma once
#include "harness/core/mesh.h"
#include "harness/spec/config.h"

namespace sb {

struct MeshConfig {
  int dp_replicate = 1, dp_shard = 0, tp = 1, pp = 1, sp = 1, ep = 1;
  Mesh mesh() const;
  static void declare(Fields<MeshConfig>& f);
};

// Fills the derived sizes in place (harness/spec/expand.cpp calls it before the point's id
// is computed, then the workloads' canonicalizers): world from the sizes when world is not
// set in the file; dp_shard (0 = unset) from world / (dp_replicate x tp x pp x sp).
void canonicalize_mesh(Point& p);

}  // namespace sb
