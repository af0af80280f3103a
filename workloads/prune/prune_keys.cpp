// The pruning keys (infer and serve read them, infer/served_model.cpp; train reads pruning,
// pruning.sparsity, pruning.scope and the schedule keys, train/train_workload.cpp) and their
// cross-key rules.
#include "harness/workload.h"

namespace sb::prune {
namespace {

// Training prunes gradually with masks (schedule.h): unstructured or 2:4 only.
void validate_train(const Point& p, std::vector<Diagnostic>& out) {
  const std::string name = p.get_string("pruning");
  if (name != "none" && name != "magnitude" && name != "2:4")
    out.push_back({"pruning", fmt::format("train prunes with masks (magnitude or 2:4); \"{}\" makes a "
                                          "smaller model: prune it in an infer point with "
                                          "pruning.export_folder, then train that folder", name)});
  const double b = p.get_double("pruning.begin"), e = p.get_double("pruning.end");
  if (!(b <= e))
    out.push_back({"pruning.begin", fmt::format("pruning.begin {} is after pruning.end {} (fractions of "
                                                "steps)", b, e)});
  if (name == "2:4" && p.get_double("pruning.sparsity") != 0.5)
    out.push_back({"pruning.sparsity", "pruning = \"2:4\" is 50% sparse by construction; set "
                                       "pruning.sparsity to 0.5"});
}

void validate(const Point& p, std::vector<Diagnostic>& out) {
  if (p.has("task") && p.get_string("task") == "train") return validate_train(p, out);
  if (!p.has("task") || (p.get_string("task") != "infer" && p.get_string("task") != "serve")) return;
  const std::string name = p.get_string("pruning"), kernel = p.get_string("pruning.kernel");
  const double s = p.get_double("pruning.sparsity");
  if (!(s >= 0 && s < 1))
    out.push_back({"pruning.sparsity", fmt::format("pruning.sparsity {} must lie in [0, 1) (a fraction "
                                                   "of the weights or channels removed)", s)});
  if (kernel != "auto" && name != "magnitude")
    out.push_back({"pruning.kernel", fmt::format("pruning.kernel chooses sparse or dense kernels for "
                                                 "magnitude pruning; pruning is \"{}\" (remove the key)", name)});
  if (kernel == "csr" && p.get_string("quantization") != "none")
    out.push_back({"pruning.kernel", fmt::format("CSR kernels run fp32 weights; quantization \"{}\" stores "
                                                 "them densely: use pruning.kernel = \"auto\" or quantization "
                                                 "= \"none\"", p.get_string("quantization"))});
  if (p.get_string("pruning.importance") != "magnitude" && name != "ffn" && name != "heads")
    out.push_back({"pruning.importance", fmt::format("pruning.importance ranks FFN channels or heads; "
                                                     "pruning is \"{}\" (use ffn or heads, or remove the key)", name)});
  if (name == "2:4" && s != 0.5)
    out.push_back({"pruning.sparsity", fmt::format("pruning = \"2:4\" is 50% sparse by construction; "
                                                   "pruning.sparsity is {} (set it to 0.5)", s)});
  if (!p.get_string("pruning.export_folder").empty() && name == "none")
    out.push_back({"pruning.export_folder", "pruning.export_folder writes the pruned model; pruning is "
                                            "\"none\" (set a pruning method or remove the key)"});
  if (p.get_string("pruning.scope") != "global" && name != "magnitude")
    out.push_back({"pruning.scope", fmt::format("pruning.scope applies to magnitude pruning; pruning is "
                                                "\"{}\" (remove the key)", name)});
}

void key(KeySpec ks, std::vector<std::string> tasks = {"infer", "serve"}) {
  ks.tasks = std::move(tasks);
  register_key(std::move(ks));
}
KeySpec fraction(const char* k, double def, const char* doc) {
  KeySpec ks{k, KeyType::Float, def, "", doc};
  ks.min_float = 0.0, ks.max_float = 1.0;
  return ks;
}

const sb::Registrar kRegister([] {
  const std::vector<std::string> all = {"infer", "serve", "train"};
  key({"pruning", KeyType::Name, std::string("none"), "pruning",
       "infer, serve: model pruning before serving (none, magnitude, ffn, heads, 2:4); train: gradual "
       "pruning with masks (magnitude, 2:4; docs/PRUNING.md)"}, all);
  register_name("pruning_schedule", "cubic", "Zhu & Gupta: s_f (1 - (1 - progress)^3) every pruning.every steps");
  register_name("pruning_schedule", "oneshot", "pruning.sparsity at pruning.begin, then fine-tuning");
  key({"pruning.schedule", KeyType::Name, std::string("cubic"), "pruning_schedule",
       "train: how the sparsity grows from pruning.begin to pruning.end"}, {"train"});
  key(fraction("pruning.begin", 0.0, "train: first pruning step, as a fraction of steps"), {"train"});
  key(fraction("pruning.end", 0.5, "train: step the final sparsity is reached (cubic), as a fraction of steps"), {"train"});
  KeySpec every{"pruning.every", KeyType::Int, std::int64_t{10}, "", "train: steps between pruning events (cubic)"};
  every.min_int = 1;
  key(std::move(every), {"train"});
  register_name("pruning_importance", "magnitude", "the weights' norms (no data)");
  register_name("pruning_importance", "taylor",
                "|sum of w x dL/dw| over the channel or head, on pruning.taylor_batches training batches");
  key({"pruning.importance", KeyType::Name, std::string("magnitude"), "pruning_importance",
       "infer, serve: how ffn and heads pruning rank channels and heads: magnitude or taylor"});
  KeySpec tb{"pruning.taylor_batches", KeyType::Int, std::int64_t{4}, "",
             "infer, serve: training batches (batch x seq) the taylor importance's gradient sums over"};
  tb.min_int = 1, tb.max_int = 1 << 20;
  key(std::move(tb));
  KeySpec ef{"pruning.export_folder", KeyType::String, std::string(""), "",
             "infer, serve: write the pruned fp32 model here as a Hugging Face folder (rank 0), to load as a model"};
  ef.writes_path = true;  // an output a later point may read (models/folder_check.h)
  key(std::move(ef));
  KeySpec sparsity{"pruning.sparsity", KeyType::Float, 0.5, "",
                   "infer, serve: fraction of the linear weights (magnitude) or FFN channels (ffn) removed"};
  sparsity.min_float = 0.0, sparsity.max_float = 1.0;
  key(std::move(sparsity), all);
  register_name("pruning_scope", "global", "one magnitude threshold over every linear weight");
  register_name("pruning_scope", "layer", "the same sparsity in every matrix");
  key({"pruning.scope", KeyType::Name, std::string("global"), "pruning_scope",
       "infer, serve, train: magnitude pruning's threshold: global or per layer"}, all);
  register_name("pruning_kernel", "auto", "per matrix, the faster of CSR and dense, timed at start-up");
  register_name("pruning_kernel", "dense", "dense fp32 matmuls on the zeroed weights");
  register_name("pruning_kernel", "csr", "CSR storage and LibTorch's sparse x dense matmul");
  key({"pruning.kernel", KeyType::Name, std::string("auto"), "pruning_kernel",
       "infer, serve: magnitude pruning's storage and kernel: auto, dense or csr"});
  register_validator(validate);
});

}  // namespace
}  // namespace sb::prune
