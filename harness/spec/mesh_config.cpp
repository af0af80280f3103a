// The mesh keys, their canonical form and their rules (mesh_config.h). The data-parallel
// dimensions run for every task, tp for task = train (workloads/train/train_mesh.cpp checks
// the model and the rest of the point), and so do pp and sp; ep for train, infer and serve.
#include "harness/spec/mesh_config.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/spec/base_config.h"

namespace sb {
namespace {

constexpr std::int64_t kMaxDim = std::int64_t{1} << 20;

bool set_in_file(const Point& p, const char* key) { return p.has(key) && p.where(key).line != 0; }

// The model-parallel dimensions: the key, what it is, and the task that runs it.
struct Pending {
  const char* key;
  const char* feature;
  std::vector<std::string> runs_in;  // the tasks that run it
};
const Pending kPending[] = {
    {"mesh.tp", "tensor parallelism", {"train"}},
    {"mesh.pp", "pipeline parallelism", {"train"}},
    {"mesh.sp", "sequence parallelism (Ulysses)", {"train"}},
    {"mesh.ep", "expert parallelism (a gpt2-moe model's experts)", {"train", "infer", "serve"}},
};

void validate(const MeshConfig& c, const Point& p, std::vector<Diagnostic>& out) {
  const int world = base_config(p).world;
  const int sizes[] = {c.tp, c.pp, c.sp, c.ep};
  const std::string task = p.has("task") ? base_config(p).task : "";
  for (int i = 0; i < 4; ++i) {
    const Pending& k = kPending[i];
    if (sizes[i] <= 1 || std::find(k.runs_in.begin(), k.runs_in.end(), task) != k.runs_in.end()) continue;
    const std::string tasks = k.runs_in.size() == 1 ? k.runs_in[0]
                              : fmt::format("{} or {}", fmt::join(k.runs_in.begin(), k.runs_in.end() - 1, ", "),
                                            k.runs_in.back());
    out.push_back({k.key, fmt::format("{} = {}: {} runs in task = {} only (this point's task "
                                      "is '{}'); set {} = 1", k.key, sizes[i], k.feature,
                                      tasks, task, k.key)});
  }
  const Mesh m = c.mesh();
  if (m.resolved() && m.world() != world) {
    out.push_back({set_in_file(p, "world") ? "world" : "mesh.dp_shard",
                   fmt::format("the mesh's sizes multiply to {} ({}) but world = {}: "
                               "dp_replicate x dp_shard x tp x pp x sp must equal world; change "
                               "one of them, or leave world unset (it defaults to the product)",
                               m.world(), m.str(), world)});
  } else if (!m.resolved() && world % (c.tp * c.pp * c.sp) != 0) {
    out.push_back({"world", fmt::format("world = {} is not divisible by tp x pp x sp = {}",
                                        world, c.tp * c.pp * c.sp)});
  }
  if (m.resolved() && (m.dp_shard * m.sp) % m.ep != 0)
    out.push_back({"mesh.ep", fmt::format("mesh.ep = {} must divide dp_shard x sp = {} (expert "
                                          "parallelism borrows data-parallel ranks)", m.ep,
                                          m.dp_shard * m.sp)});
}

}  // namespace

Mesh MeshConfig::mesh() const {
  Mesh m;
  m.pp = pp, m.dp_replicate = dp_replicate, m.dp_shard = dp_shard, m.sp = sp, m.tp = tp;
  m.ep = ep;
  return m;
}

void MeshConfig::declare(Fields<MeshConfig>& f) {
  // world is a base key (harness/workload.cpp); read here, declared there.
  auto size = [&](const char* key, int MeshConfig::*m, int def, const char* doc) {
    f.add(key, m, def, doc).range(std::int64_t{def == 0 ? 0 : 1}, kMaxDim).unit("ranks");
  };
  size("mesh.dp_replicate", &MeshConfig::dp_replicate, 1,
       "data-parallel replicas (hybrid_shard's replica groups; 1 for every other strategy)");
  size("mesh.dp_shard", &MeshConfig::dp_shard, 0,
       "data-parallel ranks a strategy shards over (shard_group is its alias); 0 = what world "
       "leaves: world / (dp_replicate x tp x pp x sp)");
  size("mesh.tp", &MeshConfig::tp, 1, "tensor-parallel ranks (innermost: contiguous ranks)");
  size("mesh.pp", &MeshConfig::pp, 1, "pipeline stages (outermost)");
  size("mesh.sp", &MeshConfig::sp, 1, "sequence-parallel ranks (Ulysses; torchtitan's cp)");
  size("mesh.ep", &MeshConfig::ep, 1,
       "expert-parallel ranks, borrowed from dp_shard x sp (not a factor of world)");
  f.validate(validate);
}

void canonicalize_mesh(Point& p) {
  if (!p.has("world") || !p.has("mesh.dp_shard")) return;  // not a full point (tests)
  auto get = [&](const char* k) { return p.get_int(k); };
  // Replicas not in the file are 1 again here: a task whose variant keeps replicas derives
  // them after this (train_mesh.cpp), so a [baseline] of another strategy does not keep them.
  if (!set_in_file(p, "mesh.dp_replicate")) p.set("mesh.dp_replicate", std::int64_t{1});
  const std::int64_t rest = get("mesh.dp_replicate") * get("mesh.tp") * get("mesh.pp") *
                            get("mesh.sp");
  // Derived values are stored without a file position, so that a later change of what they
  // derive from (a [baseline] world) derives them again: this stays idempotent.
  if (set_in_file(p, "mesh.dp_shard") && get("mesh.dp_shard") > 0) {
    if (!set_in_file(p, "world")) p.set("world", get("mesh.dp_shard") * rest);
  } else if (rest > 0 && get("world") % rest == 0) {
    p.set("mesh.dp_shard", get("world") / rest);
  }
}

SB_CONFIG_SECTION(MeshConfig);

}  // namespace sb
