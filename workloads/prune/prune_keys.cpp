// The pruning keys (infer and serve read them, infer/served_model.cpp; train reads pruning,
// pruning.sparsity, pruning.scope and the schedule keys, train/train_workload.cpp) and their
// cross-key rules.
#include "workloads/prune/prune_keys.h"
#include "workloads/prune/pruner.h"

#include <cstdint>

#include "harness/spec/config.h"
#include "harness/spec/model_keys.h"
#include "harness/workload.h"

namespace sb::prune {
namespace {

const sb::Registrar kNames([] {
  register_name("pruning_schedule", "cubic", "Zhu & Gupta: s_f (1 - (1 - progress)^3) every pruning.every steps");
  register_name("pruning_schedule", "oneshot", "pruning.sparsity at pruning.begin, then fine-tuning");
  register_name("pruning_importance", "magnitude", "the weights' norms (no data)");
  register_name("pruning_importance", "taylor",
                "|sum of w x dL/dw| over the channel or head, on pruning.taylor_batches training batches");
  register_name("pruning_scope", "global", "one magnitude threshold over every linear weight");
  register_name("pruning_scope", "layer", "the same sparsity in every matrix");
  register_name("pruning_kernel", "auto", "per matrix, the faster of CSR and dense, timed at start-up");
  register_name("pruning_kernel", "dense", "dense fp32 matmuls on the zeroed weights");
  register_name("pruning_kernel", "csr", "CSR storage and LibTorch's sparse x dense matmul");
});

// The registered methods whose record passes `has`, "a, b or c" (none, the absence, left out).
template <class Has>
std::string methods_where(Has has) {
  std::vector<std::string> names;
  for (const auto& n : registered_names("pruning"))
    if (n.first != "none" && has(pruner_info(n.first))) names.push_back(n.first);
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

// A method sparse by construction (2:4) takes exactly its own sparsity.
void check_fixed_sparsity(const PruneKeys& k, const PrunerInfo& info, std::vector<Diagnostic>& out) {
  if (info.fixed_sparsity > 0 && k.sparsity != info.fixed_sparsity)
    out.push_back({"pruning.sparsity", fmt::format("pruning = \"{}\" is {}% sparse by construction; "
                                                   "pruning.sparsity is {} (set it to {})", k.method,
                                                   info.fixed_sparsity * 100, k.sparsity, info.fixed_sparsity)});
}

// Training prunes gradually with masks (schedule.h): the methods whose record has masks.
void validate_train(const PruneScheduleKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const PruneKeys& k = config<PruneKeys>(p);
  const std::string& name = k.method;
  const PrunerInfo* info = find_pruner(name);  // unknown: the name check reports it
  if (info && !info->masks)
    out.push_back({"pruning", fmt::format("train prunes with masks ({}); \"{}\" makes a "
                                          "smaller model: prune it in an infer point with "
                                          "pruning.export_folder, then train that folder",
                                          methods_where([](const PrunerInfo& i) { return i.masks; }), name)});
  if (!(c.begin <= c.end))
    out.push_back({"pruning.begin", fmt::format("pruning.begin {} is after pruning.end {} (fractions of "
                                                "steps)", c.begin, c.end)});
  if (info) check_fixed_sparsity(k, *info, out);
}

void validate_convert(const PruneConvertKeys& c, const Point& p, std::vector<Diagnostic>& out) {
  const PruneKeys& k = config<PruneKeys>(p);
  const std::string& name = k.method;
  const double s = k.sparsity;
  const PrunerInfo* info = find_pruner(name);  // unknown: the name check reports it
  if (!(s >= 0 && s < 1))
    out.push_back({"pruning.sparsity", fmt::format("pruning.sparsity {} must lie in [0, 1) (a fraction "
                                                   "of the weights or channels removed)", s)});
  if (info && c.kernel != "auto" && !info->threshold)
    out.push_back({"pruning.kernel", fmt::format("pruning.kernel chooses sparse or dense kernels for "
                                                 "magnitude pruning; pruning is \"{}\" (remove the key)", name)});
  const std::string& quantization = config<InferChoice>(p).quantization;
  if (c.kernel == "csr" && quantization != "none")
    out.push_back({"pruning.kernel", fmt::format("CSR kernels run fp32 weights; quantization \"{}\" stores "
                                                 "them densely: use pruning.kernel = \"auto\" or quantization "
                                                 "= \"none\"", quantization)});
  if (info && c.importance != "magnitude" && !info->ranks_units)
    out.push_back({"pruning.importance", fmt::format("pruning.importance ranks FFN channels or heads; "
                                                     "pruning is \"{}\" (use {}, or remove the key)", name,
                                                     methods_where([](const PrunerInfo& i) { return i.ranks_units; }))});
  if (info) check_fixed_sparsity(k, *info, out);
  if (!c.export_folder.empty() && name == "none")
    out.push_back({"pruning.export_folder", "pruning.export_folder writes the pruned model; pruning is "
                                            "\"none\" (set a pruning method or remove the key)"});
  if (info && k.scope != "global" && !info->threshold)
    out.push_back({"pruning.scope", fmt::format("pruning.scope applies to magnitude pruning; pruning is "
                                                "\"{}\" (remove the key)", name)});
}

}  // namespace

void PruneKeys::declare(Fields<PruneKeys>& f) {
  f.tasks({"infer", "serve", "train"});
  f.name("pruning", &PruneKeys::method, "pruning", "none",
         "infer, serve: model pruning before serving (none, magnitude, ffn, heads, 2:4); train: gradual "
         "pruning with masks (magnitude, 2:4; docs/PRUNING.md)");
  f.add("pruning.sparsity", &PruneKeys::sparsity, 0.5,
        "infer, serve: fraction of the linear weights (magnitude) or FFN channels (ffn) removed")
      .range(0.0, 1.0);
  f.name("pruning.scope", &PruneKeys::scope, "pruning_scope", "global",
         "infer, serve, train: magnitude pruning's threshold: global or per layer");
}
SB_CONFIG_SECTION(PruneKeys);

void PruneScheduleKeys::declare(Fields<PruneScheduleKeys>& f) {
  f.tasks({"train"});
  f.name("pruning.schedule", &PruneScheduleKeys::schedule, "pruning_schedule", "cubic",
         "train: how the sparsity grows from pruning.begin to pruning.end");
  f.add("pruning.begin", &PruneScheduleKeys::begin, 0.0,
        "train: first pruning step, as a fraction of steps").range(0.0, 1.0);
  f.add("pruning.end", &PruneScheduleKeys::end, 0.5,
        "train: step the final sparsity is reached (cubic), as a fraction of steps").range(0.0, 1.0);
  f.add("pruning.every", &PruneScheduleKeys::every, std::int64_t{10},
        "train: steps between pruning events (cubic)").min(1);
  f.validate(validate_train);
}
SB_CONFIG_SECTION(PruneScheduleKeys);

void PruneConvertKeys::declare(Fields<PruneConvertKeys>& f) {
  f.tasks({"infer", "serve"});
  f.name("pruning.importance", &PruneConvertKeys::importance, "pruning_importance", "magnitude",
         "infer, serve: how ffn and heads pruning rank channels and heads: magnitude or taylor");
  f.add("pruning.taylor_batches", &PruneConvertKeys::taylor_batches, std::int64_t{4},
        "infer, serve: training batches (batch x seq) the taylor importance's gradient sums over")
      .range(1, 1 << 20);
  // An output a later point may read (models/folder_check.h).
  f.add("pruning.export_folder", &PruneConvertKeys::export_folder, std::string(""),
        "infer, serve: write the pruned fp32 model here as a Hugging Face folder (rank 0), to load as a model")
      .writes_path();
  f.name("pruning.kernel", &PruneConvertKeys::kernel, "pruning_kernel", "auto",
         "infer, serve: magnitude pruning's storage and kernel: auto, dense or csr");
  f.validate(validate_convert);
}
SB_CONFIG_SECTION(PruneConvertKeys);

}  // namespace sb::prune
