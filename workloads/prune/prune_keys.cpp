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
       "infer, serve: model pruning before serving (none, magnitude, ffn; docs/PRUNING.md)"});
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
