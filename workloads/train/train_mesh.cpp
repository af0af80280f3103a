// The train task's process mesh (docs/SUITES.md "mesh") and its micro-batches (grad_accum is
// the old name of microbatches): shard_group is the old name of mesh.dp_shard, and a strategy
// whose record reduces over replicas (hybrid_shard today) takes the ranks of a node as its
// shard group by default, as shard_group = 0 always meant. The
// mesh's own canonical form (harness/spec/mesh_config.cpp) runs first; this fills in what only
// the strategy's record knows, and refuses what no strategy can run.
#include <fmt/format.h>

#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/mesh_config.h"
#include "harness/spec/model_keys.h"
#include "harness/workload.h"
#include "workloads/comm/policy.h"
#include "workloads/distill/distill_config.h"
#include "workloads/fsdp/strategy.h"
#include "workloads/models/family.h"
#include "workloads/data/data_config.h"
#include "workloads/data/labelled.h"
#include "workloads/models/model.h"
#include "workloads/parallel/pp_schedule.h"
#include "workloads/prune/prune_keys.h"
#include "workloads/train/train_config.h"

namespace sb::train {
namespace {

using I = std::int64_t;

bool in_file(const Point& p, const char* key) { return p.has(key) && p.where(key).line != 0; }

const fsdp::StrategyInfo* train_strategy(const Point& p) {
  if (!p.has("task") || !p.has("strategy") || !p.has("mesh.dp_shard") || !p.has("shard_group"))
    return nullptr;  // not a full point (tests)
  if (base_config(p).task != "train") return nullptr;
  return fsdp::find_strategy(config<ModelKeys>(p).strategy);
}

bool keeps_replicas(const fsdp::StrategyInfo& s) { return s.uses(fsdp::MeshDim::dp_replicate); }

// Derived values are set without a file position (as mesh_config.cpp does), so a [baseline]
// that changes world derives them again.
void canonicalize(Point& p) {
  const auto* s = train_strategy(p);
  if (!s || !keeps_replicas(*s)) return;  // shards over every data-parallel rank: the default
  // Copies: p.set() below starts a new parse of the point.
  const MeshConfig m = config<MeshConfig>(p);
  const I world = base_config(p).world;
  const I others = I{m.tp} * m.pp * m.sp;
  const I shard = in_file(p, "mesh.dp_shard") ? m.dp_shard : config<StepKeys>(p).shard_group;
  if (in_file(p, "mesh.dp_replicate") && !in_file(p, "mesh.dp_shard") &&
      !in_file(p, "shard_group"))
    return;  // the replicas given: mesh_config.cpp derived dp_shard from them
  if (shard == 0) {  // the ranks of a node, resolved at launch (Mesh::resolve_node_local)
    p.set("mesh.dp_shard", I{0});
    if (!in_file(p, "mesh.dp_replicate")) p.set("mesh.dp_replicate", I{0});
    return;
  }
  if (!in_file(p, "mesh.dp_shard")) p.set("mesh.dp_shard", shard);
  if (!in_file(p, "mesh.dp_replicate") && others > 0 && world % (shard * others) == 0)
    p.set("mesh.dp_replicate", world / (shard * others));
}

// grad_accum is microbatches' old name: a point that sets only grad_accum gets its value as
// microbatches, and the canonical config holds the same value under both names (one id
// whichever name a suite uses). Different values for both are refused (validate).
void canonicalize_microbatches(Point& p) {
  if (!p.has("task") || !p.has("microbatches") || !p.has("grad_accum") || base_config(p).task != "train")
    return;
  const bool m = in_file(p, "microbatches"), g = in_file(p, "grad_accum");
  if (g && !m) p.set("microbatches", config<OptimKeys>(p).grad_accum);
  else if (m && !g) p.set("grad_accum", config<OptimKeys>(p).microbatches);
}

std::string strategies_with_replicas() {
  std::string out;
  for (const auto& name : fsdp::strategy_names())
    if (keeps_replicas(fsdp::strategy_info(name))) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "(none registered)" : out;
}

void validate(const Point& p, std::vector<Diagnostic>& out) {
  const auto* s = train_strategy(p);
  if (!s) return;
  if (in_file(p, "grad_accum") && in_file(p, "microbatches") &&
      config<OptimKeys>(p).grad_accum != config<OptimKeys>(p).microbatches)
    out.push_back({"grad_accum", fmt::format("grad_accum = {} and microbatches = {} disagree: "
                                             "grad_accum is the old name of microbatches; set only "
                                             "microbatches", config<OptimKeys>(p).grad_accum,
                                             config<OptimKeys>(p).microbatches)});
  const std::string& strategy = config<ModelKeys>(p).strategy;
  const MeshConfig& m = config<MeshConfig>(p);
  const I shard_group = config<StepKeys>(p).shard_group;
  if (keeps_replicas(*s) && in_file(p, "shard_group") && in_file(p, "mesh.dp_shard") &&
      shard_group != m.dp_shard)
    out.push_back({"mesh.dp_shard",
                   fmt::format("shard_group = {} and mesh.dp_shard = {} disagree: shard_group is "
                               "the old name of mesh.dp_shard; set only mesh.dp_shard",
                               shard_group, m.dp_shard)});
  const I replicas = m.dp_replicate;
  if (!keeps_replicas(*s) && replicas != 1)
    out.push_back({"mesh.dp_replicate",
                   fmt::format("mesh.dp_replicate = {}: strategy '{}' keeps no replicas (it "
                               "shards over every data-parallel rank); set mesh.dp_replicate = 1, "
                               "or use a strategy that replicates shard groups: {}",
                               replicas, strategy, strategies_with_replicas())});
}

// The point's compression policy; one that does not parse counts as none (the policy's own
// validator reports it).
comm::Policy point_policy(const Point& p) {
  try {
    return comm::policy_from_point(p);
  } catch (const sb::Error&) {
    return comm::Policy{};
  }
}

// Custom compressors on a model-parallel dimension's traffic (kinds act and grad) that the mesh
// does not have (dim_key = 1), refused on act's key.
void refuse_idle_codecs(const comm::Policy& policy, int size, comm::CollectiveKind act,
                        comm::CollectiveKind grad, const char* dim_key, const char* traffic,
                        std::vector<Diagnostic>& out) {
  if (size > 1 || policy.preset != "custom" || !(policy.compresses(act) || policy.compresses(grad)))
    return;
  out.push_back({std::string(comm::key_prefix(act)) + ".name",
                 fmt::format("{} / {} compress {} traffic, and {} = 1 has none: set {} > 1, or set "
                             "both to \"none\"", comm::key_prefix(act), comm::key_prefix(grad),
                             traffic, dim_key, dim_key)});
}

// `what` (set by `key`) does not run over a model-parallel dimension yet (dim_key = size > 1;
// `name` says which parallelism): the refusal with its fix.
Diagnostic unsupported(const char* key, const char* what, const char* name, const char* dim_key,
                       int size) {
  return {key, fmt::format("{} does not run with {} yet ({} = {}); unset {}, or set {} = 1", what,
                           name, dim_key, size, key, dim_key)};
}

// What no model-parallel dimension runs yet: distillation, pruning.
void refuse_unsupported(const Point& p, const char* dim_key, int size, const char* name,
                        std::vector<Diagnostic>& out) {
  const auto refuse = [&](const char* key, const char* what) {
    out.push_back(unsupported(key, what, name, dim_key, size));
  };
  if (!config<distill::DistillKeys>(p).teacher.empty()) refuse("teacher", "distillation");
  if (config<prune::PruneKeys>(p).method != "none") refuse("pruning", "pruning");
}

// Tensor parallelism (mesh.tp > 1): a family whose record says it has the layout, sizes the
// model can split, and none of what does not run over tp yet (each named with its fix).
void validate_tp(const Point& p, std::vector<Diagnostic>& out) {
  const int tp = config<MeshConfig>(p).tp;
  if (!p.has("task") || base_config(p).task != "train") return;
  const bool sp = config<StepKeys>(p).tp_sequence_parallel;
  if (sp && tp <= 1)
    out.push_back({"tp_sequence_parallel", "tp_sequence_parallel = true splits the LayerNorm "
                   "regions' rows over mesh.tp, which is 1 here: set mesh.tp > 1, or "
                   "tp_sequence_parallel = false"});
  // Tensor parallelism's compressors (compress.tp_act / tp_grad, uniform3d, hybrid3d).
  const comm::Policy policy = point_policy(p);
  const bool tp_codec = policy.compresses(comm::CollectiveKind::TpAct) ||
                        policy.compresses(comm::CollectiveKind::TpGrad);
  refuse_idle_codecs(policy, tp, comm::CollectiveKind::TpAct, comm::CollectiveKind::TpGrad, "mesh.tp",
                     "tensor-parallel", out);
  if (tp_codec && tp > 1 && sp)
    out.push_back({"tp_sequence_parallel", fmt::format(
        "compression \"{}\" compresses tensor-parallel traffic, which sequence parallelism's "
        "all-gathers and reduce-scatters do not do yet: set tp_sequence_parallel = false, or "
        "use a policy whose compress.tp_act and compress.tp_grad are \"none\"", policy.preset)});
  if (tp <= 1) return;
  if (sp) {  // each data-parallel rank's B x T rows in tp equal blocks
    const I world = base_config(p).world, accum = config<OptimKeys>(p).microbatches;
    const I dp = world % tp == 0 ? world / tp : 0, batch = config<ModelKeys>(p).batch;
    const I rows = dp > 0 && accum > 0 ? batch / dp / accum * config<ModelKeys>(p).seq : 0;
    if (rows > 0 && rows % tp != 0)
      out.push_back({"tp_sequence_parallel",
                     fmt::format("sequence parallelism splits each micro-batch's {} rows (batch "
                                 "rows x seq) into mesh.tp = {} blocks: they must divide by tp; "
                                 "change batch or seq", rows, tp)});
  }
  const std::string& preset = config<ModelKeys>(p).model;
  std::string why;
  try {
    const auto model = models::make_model(preset);
    if (!models::family(model->config().family).tensor_parallel)
      why = fmt::format("model '{}' ({}) has no tensor-parallel layout (its family's record: "
                        "tensor_parallel = false); set mesh.tp = 1, or train a gpt2 model",
                        preset, model->config().family);
    else
      why = model->tensor_parallel_problem(tp);
  } catch (const std::exception&) {
    return;  // an unknown model: the model key's own check names it
  }
  if (!why.empty()) out.push_back({"mesh.tp", why});
  refuse_unsupported(p, "mesh.tp", tp, "tensor parallelism", out);
}

// Pipeline parallelism (mesh.pp > 1): a model that can be cut into mesh.pp x pp_virtual_stages
// stages, a schedule that runs `microbatches` micro-batches that way, and none of what does not run
// over a pipeline yet (each named with its fix). Checkpoints run: each rank's file holds its
// stages' units, so a pipelined run resumes on the same mesh.
void validate_pp(const Point& p, std::vector<Diagnostic>& out) {
  if (!p.has("task") || base_config(p).task != "train") return;
  const int pp = config<MeshConfig>(p).pp;
  const StepKeys& k = config<StepKeys>(p);
  const I v = k.pp_virtual_stages, m = config<OptimKeys>(p).microbatches;
  refuse_idle_codecs(point_policy(p), pp, comm::CollectiveKind::PpAct, comm::CollectiveKind::PpGrad,
                     "mesh.pp", "pipeline-parallel", out);
  if (pp <= 1 && !k.pp_layers.empty())
    out.push_back({"pp_layers", fmt::format("pp_layers = \"{}\" cuts the model into pipeline "
                   "stages, and mesh.pp = 1 has no pipeline: set mesh.pp > 1, or pp_layers = \"\"",
                   k.pp_layers)});
  if (pp <= 1) {
    if (v > 1)
      out.push_back({"pp_virtual_stages", fmt::format("pp_virtual_stages = {} places several model "
                     "stages on each pipeline rank, and mesh.pp = 1 has no pipeline: set mesh.pp > 1, "
                     "or pp_virtual_stages = 1", v)});
    return;
  }
  try {
    const std::string why = parallel::pp_schedule_refuses(parallel::find_pp_schedule(k.pp_schedule), pp,
                                                          static_cast<int>(m), static_cast<int>(v));
    if (!why.empty()) out.push_back({"pp_schedule", why});
  } catch (const sb::Error&) {  // an unknown schedule: the name check reports it
  }
  try {
    const auto model = models::make_model(config<ModelKeys>(p).model);
    const std::string why = model->pipeline_problem(static_cast<int>(pp * v));
    if (!why.empty()) out.push_back({"mesh.pp", why});
    if (why.empty() && !k.pp_layers.empty()) {
      std::string bad;
      try {
        bad = models::stage_layers_problem(models::parse_stage_layers(k.pp_layers),
                                           model->config().n_layer, static_cast<int>(pp * v));
      } catch (const sb::Error& e) {
        bad = e.what();
      }
      if (!bad.empty()) out.push_back({"pp_layers", bad});
    }
  } catch (const std::exception&) {  // an unknown model: the model key's own check names it
  }
  refuse_unsupported(p, "mesh.pp", pp, "pipeline parallelism", out);
  if (data::is_labelled_path(config<data::DataKeys>(p).data))
    out.push_back(unsupported("data", "classification data (its accuracy runs the whole model's "
                              "classify)", "pipeline parallelism", "mesh.pp", pp));
}

// Ulysses sequence parallelism (mesh.sp > 1): a family whose record says it has the attention
// for it, heads (per tp rank) and seq that split over sp, and none of what does not run over
// sp yet (each named with its fix).
void validate_sp(const Point& p, std::vector<Diagnostic>& out) {
  if (!p.has("task") || base_config(p).task != "train") return;
  const MeshConfig& m = config<MeshConfig>(p);
  if (m.sp <= 1) return;
  try {
    const auto model = models::make_model(config<ModelKeys>(p).model);
    const std::string& family = model->config().family;
    if (!models::family(family).sequence_parallel)
      out.push_back({"mesh.sp", fmt::format("model '{}' ({}) has no sequence-parallel attention "
                     "(its family's record: sequence_parallel = false); set mesh.sp = 1, or train "
                     "a gpt2 model", config<ModelKeys>(p).model, family)});
    else if (const std::string why = model->sequence_parallel_problem(m.sp, config<ModelKeys>(p).seq, m.tp);
             !why.empty())
      out.push_back({"mesh.sp", why});
  } catch (const std::exception&) {
    return;  // an unknown model: the model key's own check names it
  }
  if (config<StepKeys>(p).tp_sequence_parallel)
    out.push_back({"tp_sequence_parallel", fmt::format("tp_sequence_parallel = true (Megatron's "
                   "row split over tp) does not run with Ulysses (mesh.sp = {}) yet; set "
                   "tp_sequence_parallel = false, or mesh.sp = 1", m.sp)});
  if (m.pp > 1) out.push_back(unsupported("mesh.pp", "pipeline parallelism", "sequence parallelism", "mesh.sp", m.sp));
  refuse_unsupported(p, "mesh.sp", m.sp, "sequence parallelism", out);
  if (data::is_labelled_path(config<data::DataKeys>(p).data))
    out.push_back(unsupported("data", "classification data", "sequence parallelism", "mesh.sp", m.sp));
}

// Expert parallelism (mesh.ep > 1; mesh_config.cpp refuses tasks other than train and infer,
// and checked that ep divides dp_shard x sp): for both tasks a mixture of experts whose experts
// divide by ep, without dp_replicate; for train also without tp, sp or pp and none of what
// does not run over ep yet (each named with its fix). Infer's own rules (top-1, the placement
// file) are moe_keys.cpp's.
void validate_ep(const Point& p, std::vector<Diagnostic>& out) {
  const MeshConfig& m = config<MeshConfig>(p);
  const std::string task = p.has("task") ? base_config(p).task : "";
  if (m.ep <= 1 || (task != "train" && task != "infer" && task != "serve")) return;
  const bool train = task == "train";
  try {
    auto model = models::make_model(config<ModelKeys>(p).model);
    const std::string why = model->expert_parallel_problem(m.ep);
    if (!why.empty()) out.push_back({"mesh.ep", why});
    for (const auto& [size, key] : {std::pair{m.tp, "mesh.tp"}, {m.pp, "mesh.pp"}})
      if (train && why.empty() && size > 1)
        out.push_back({key, fmt::format("expert parallelism (mesh.ep = {}) does not run with {} = {} "
                       "yet; set {} = 1", m.ep, key, size, key)});
  } catch (const std::exception&) {
    return;  // an unknown model: the model key's own check names it
  }
  if (train) refuse_unsupported(p, "mesh.ep", m.ep, "expert parallelism", out);
}

Registrar reg([] {
  register_canonicalizer(canonicalize);
  register_canonicalizer(canonicalize_microbatches);
  register_validator(validate);
  register_validator(validate_tp);
  register_validator(validate_pp);
  register_validator(validate_sp);
  register_validator(validate_ep);
});

}  // namespace
}  // namespace sb::train
