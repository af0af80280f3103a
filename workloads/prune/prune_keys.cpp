// The pruning keys (infer and serve read them; infer/served_model.cpp) and their cross-key rules.
#include "harness/workload.h"

namespace sb::prune {
namespace {

void validate(const Point& p, std::vector<Diagnostic>& out) {
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

void key(KeySpec ks) {
  ks.tasks = {"infer", "serve"};
  register_key(std::move(ks));
}

const sb::Registrar kRegister([] {
  key({"pruning", KeyType::Name, std::string("none"), "pruning",
       "infer, serve: model pruning before serving (none, magnitude, ffn, heads, 2:4; docs/PRUNING.md)"});
  register_name("pruning_importance", "magnitude", "the weights' norms (no data)");
  register_name("pruning_importance", "taylor",
                "|sum of w x dL/dw| over the channel or head, on pruning.taylor_batches training batches");
  key({"pruning.importance", KeyType::Name, std::string("magnitude"), "pruning_importance",
       "infer, serve: how ffn and heads pruning rank channels and heads: magnitude or taylor"});
  KeySpec tb{"pruning.taylor_batches", KeyType::Int, std::int64_t{4}, "",
             "infer, serve: training batches (batch x seq) the taylor importance's gradient sums over"};
  tb.min_int = 1, tb.max_int = 1 << 20;
  key(std::move(tb));
  key({"pruning.export_folder", KeyType::String, std::string(""), "",
       "infer, serve: write the pruned fp32 model here as a Hugging Face folder (rank 0), to load as a model"});
  KeySpec sparsity{"pruning.sparsity", KeyType::Float, 0.5, "",
                   "infer, serve: fraction of the linear weights (magnitude) or FFN channels (ffn) removed"};
  sparsity.min_float = 0.0, sparsity.max_float = 1.0;
  key(std::move(sparsity));
  register_name("pruning_scope", "global", "one magnitude threshold over every linear weight");
  register_name("pruning_scope", "layer", "the same sparsity in every matrix");
  key({"pruning.scope", KeyType::Name, std::string("global"), "pruning_scope",
       "infer, serve: magnitude pruning's threshold: global or per layer"});
  register_name("pruning_kernel", "auto", "per matrix, the faster of CSR and dense, timed at start-up");
  register_name("pruning_kernel", "dense", "dense fp32 matmuls on the zeroed weights");
  register_name("pruning_kernel", "csr", "CSR storage and LibTorch's sparse x dense matmul");
  key({"pruning.kernel", KeyType::Name, std::string("auto"), "pruning_kernel",
       "infer, serve: magnitude pruning's storage and kernel: auto, dense or csr"});
  register_validator(validate);
});

}  // namespace
}  // namespace sb::prune
