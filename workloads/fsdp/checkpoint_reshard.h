// A checkpoint set's logical tensors (private to workloads/fsdp): every rank file's shard
// layout (checkpoint_file.h) says which elements of which whole parameter it holds, so the
// whole parameters (and their Adam moments) can be assembled from the set whatever mesh,
// strategy and world wrote it, then cut for the mesh that reads it: torch.distributed.
// checkpoint's resharding, done at load. docs/FSDP.md "Checkpoints across meshes".
#pragma once
#include <array>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "workloads/comm/compressor.h"  // comm::StateDict
#include "workloads/fsdp/checkpoint_set.h"
#include "workloads/models/model.h"

namespace sb::fsdp::ckpt {

// One whole parameter: master, exp_avg, exp_avg_sq (fp32, its whole shape; the moments are
// undefined when not asked for).
struct LogicalParam {
  std::vector<std::int64_t> shape;
  std::array<torch::Tensor, 3> t;
};
// (whole-model unit index, Hugging Face name) -> the parameter.
using Logical = std::map<std::pair<int, std::string>, LogicalParam>;

// Reads every rank file the marker of `set` lists (one at a time) and assembles the whole
// parameters of the units in `wanted` (empty: all). Throws naming the file when one is
// missing, corrupt or not of this set, and naming the parameter when no file holds some of
// its elements. state0: rank 0's state entries (compression and engine state), if not null.
Logical assemble(const std::string& set, const Marker& m, const std::set<int>& wanted,
                 bool moments, comm::StateDict* state0 = nullptr);

// Parameter p of unit `unit_name` (whole-model unit `whole`) as this model holds it (its tp
// block, spec shape), kind 0 master, 1 exp_avg, 2 exp_avg_sq. Throws when the set has no such
// parameter or another shape (another model), or when no file held some of its elements.
torch::Tensor param_of(const Logical& lg, int whole, const std::string& unit_name,
                       const models::ParamSpec& p, int kind, const std::string& set);

// Unit `spec`'s (whole-model unit `whole`) parameters as this model holds them (its tp
// blocks), flattened back to back and zero-padded to `padded`: kind 0 master, 1 exp_avg,
// 2 exp_avg_sq. Throws when the set has no such parameter or another shape (another model).
torch::Tensor unit_flat(const Logical& lg, int whole, const models::UnitSpec& spec, int kind,
                        std::int64_t padded, const std::string& set);

}  // namespace sb::fsdp::ckpt
