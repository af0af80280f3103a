// The moe.* keys (moe.h; docs/SUITES.md): how a gpt2-moe model routes, for the tasks that
// build one. The experts and their layout (moe.experts, moe.every) are the model's (its preset
// or folder); these set the router's choice, capacities and losses.
#include <filesystem>
#include <limits>

#include "harness/core/check.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/mesh_config.h"
#include "harness/spec/model_keys.h"
#include "harness/workload.h"
#include "workloads/models/ep_inference.h"
#include "workloads/models/model.h"

namespace sb::models {

struct MoeKeys {
  std::int64_t top_k = 1;
  double capacity_factor = 0, eval_capacity_factor = 0, aux_loss_coef = 0, z_loss_coef = 0;
  std::int64_t trace_every = 0;
  std::string ep_form, expert_placement;  // infer under mesh.ep (ep_inference.h)
  static void declare(Fields<MoeKeys>& f);
};

namespace {

// Expert-parallel inference (ep_inference.h): top-1, and a placement file made for this
// model, its experts and this mesh.ep; infer and serve. Train never reads the two keys (their tasks()).
void validate_ep_inference(const MoeKeys& k, const Point& p, const ModelConfig& m, std::vector<Diagnostic>& out) {
  const int ep = config<MeshConfig>(p).ep;
  const std::string task = p.has("task") ? base_config(p).task : "";
  if (task != "infer" && task != "serve") return;
  if (ep <= 1) {
    if (k.ep_form != "dispatch_combine" || !k.expert_placement.empty())
      out.push_back({k.expert_placement.empty() ? "moe.ep_form" : "moe.expert_placement",
                     "moe.ep_form and moe.expert_placement choose how mesh.ep > 1 infers; this point has "
                     "mesh.ep = 1: set mesh.ep, or drop them"});
    return;
  }
  // The split itself (a dense model, experts not divisible by ep) and dp_replicate are
  // train_mesh.cpp's validate_ep's, for train, infer and serve alike.
  if (!expert_parallel_problem(m.moe, ep).empty()) return;
  if (k.top_k != 1 && k.ep_form == "coherent")
    out.push_back({"moe.top_k", fmt::format("moe.ep_form = \"coherent\" keeps a token on its one expert's "
                   "rank, so it routes top-1: set moe.top_k = 1, or moe.ep_form = \"dispatch_combine\" "
                   "(two all-to-alls a MoE layer) for top-{}", k.top_k)});
  if (!k.expert_placement.empty() && !std::filesystem::exists(k.expert_placement)) {
    out.push_back({"moe.expert_placement", fmt::format("{} does not exist yet: write it with `shardbench "
                   "moe-place RESULTS --ep {}` before the point runs", k.expert_placement, ep), true});
  } else if (!k.expert_placement.empty()) {
    try {
      read_placement(k.expert_placement, config<ModelKeys>(p).model, m.moe, m.n_layer, ep);
    } catch (const Error& e) {
      out.push_back({"moe.expert_placement", e.message()});
    }
  }
}

void validate(const MoeKeys& k, const Point& p, std::vector<Diagnostic>& out) {
  ModelConfig m;
  try {
    m = preset_config(config<ModelKeys>(p).model);
  } catch (const std::exception&) {
    return;  // an unknown model: the model key's check names it
  }
  const MoeConfig dflt;
  const bool set = k.top_k != dflt.top_k || k.trace_every != 0 || k.capacity_factor != dflt.capacity_factor ||
                   k.eval_capacity_factor != dflt.eval_capacity_factor ||
                   k.aux_loss_coef != dflt.aux_loss_coef || k.z_loss_coef != dflt.z_loss_coef;
  validate_ep_inference(k, p, m, out);
  if (!m.moe.on()) {
    if (set)
      out.push_back({"moe.top_k", fmt::format("the moe.* keys route a mixture of experts, and model "
                     "'{}' has none; use a gpt2-moe-* model, or drop the moe.* keys",
                     config<ModelKeys>(p).model)});
    return;
  }
  if (k.top_k > m.moe.experts)
    out.push_back({"moe.top_k", fmt::format("moe.top_k {} exceeds the {} experts of model '{}'; use 1 "
                   "(Switch) or 2 (GShard)", k.top_k, m.moe.experts, config<ModelKeys>(p).model)});
}

}  // namespace

void MoeKeys::declare(Fields<MoeKeys>& f) {
  const MoeConfig d;
  f.tasks({"train", "infer", "serve"});
  f.add("moe.top_k", &MoeKeys::top_k, d.top_k,
        "experts a token is routed to in a gpt2-moe model: 1 (Switch) or 2 (GShard, renormalized)")
      .range(1, 64);
  f.add("moe.capacity_factor", &MoeKeys::capacity_factor, d.capacity_factor,
        "training: an expert takes ceil(top_k x factor x tokens / experts) of a routing group's "
        "assignments, the highest router probabilities first; <= 0 = no limit");
  f.add("moe.eval_capacity_factor", &MoeKeys::eval_capacity_factor, d.eval_capacity_factor,
        "the same without gradients (evaluation, inference)");
  f.add("moe.aux_loss_coef", &MoeKeys::aux_loss_coef, d.aux_loss_coef,
        "weight of Switch's load-balancing loss, per MoE layer").min(0.0);
  f.add("moe.z_loss_coef", &MoeKeys::z_loss_coef, d.z_loss_coef,
        "weight of the router z-loss (ST-MoE), per MoE layer").min(0.0);
  f.add("moe.trace_every", &MoeKeys::trace_every, 0,
        "train: record every token's routing at each MoE layer (the /routing table) in every N-th "
        "step's last forward and in the last step; 0 = never")
      .range(0, std::numeric_limits<int>::max())
      .tasks({"train"});
  f.name("moe.ep_form", &MoeKeys::ep_form, "moe_ep_form", "dispatch_combine",
         "infer and serve under mesh.ep > 1: dispatch_combine (two all-to-alls a MoE layer) or coherent "
         "(ExFlow's one, the context all-gathered)")
      .tasks({"infer", "serve"});
  f.add("moe.expert_placement", &MoeKeys::expert_placement, std::string(),
        "infer and serve under mesh.ep > 1: the placement file `shardbench moe-place` wrote (each MoE "
        "layer's experts' ranks); \"\" = rank r holds experts [r E/ep, (r+1) E/ep)")
      .tasks({"infer", "serve"});
  f.validate(validate);
}
SB_CONFIG_SECTION(MoeKeys);

const Registrar names([] {
  register_name("moe_ep_form", "dispatch_combine", "each MoE layer's tokens to their experts and back: two all-to-alls");
  register_name("moe_ep_form", "coherent", "ExFlow: tokens stay with their expert, one all-to-all a MoE layer; "
                "each layer's keys and values all-gathered");
});

std::string moe_ep_form(const Point& p) { return config<MoeKeys>(p).ep_form; }
std::string moe_expert_placement(const Point& p) { return config<MoeKeys>(p).expert_placement; }

std::int64_t moe_trace_every(const Point& p) { return config<MoeKeys>(p).trace_every; }

void apply_moe_keys(const Point& p, ModelConfig& c) {
  if (!c.moe.on()) return;
  const MoeKeys& k = config<MoeKeys>(p);
  c.moe.top_k = k.top_k;
  c.moe.capacity_factor = k.capacity_factor, c.moe.eval_capacity_factor = k.eval_capacity_factor;
  c.moe.aux_loss_coef = k.aux_loss_coef, c.moe.z_loss_coef = k.z_loss_coef;
}

}  // namespace sb::models
