// The pruning registry (pruner.h).
#include "workloads/prune/pruner.h"

#include <map>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/family.h"

namespace sb::prune {
namespace {

std::map<std::string, Pruner>& registry() {
  static std::map<std::string, Pruner> r;
  return r;
}

Pruned none(const models::Model& model, const models::UnitTensors& weights, const PruneConfig&) {
  Pruned p;
  p.model = models::family(model.config().family).make(model.config());
  p.weights = weights;
  return p;
}

const sb::Registrar kNone([] {
  register_pruner("none", "no pruning", none);
});

}  // namespace

torch::Tensor most_important(const torch::Tensor& importance, std::int64_t k) {
  auto order = std::get<1>(importance.sort(/*stable=*/true, 0, /*descending=*/true));
  return std::get<0>(order.narrow(0, 0, k).sort());
}

void check_pruned_shapes(const Pruned& p, const std::string& method) {
  const auto& units = p.model->units();
  for (std::size_t u = 0; u < units.size(); ++u)
    for (std::size_t i = 0; i < units[u].params.size(); ++i)
      SB_CHECK(p.weights[u][i].sizes() == torch::IntArrayRef(units[u].params[i].shape),
               "pruning {}: {} has shape {}, the pruned model expects {}", method, units[u].params[i].name,
               c10::str(p.weights[u][i].sizes()), c10::str(torch::IntArrayRef(units[u].params[i].shape)));
}

const torch::Tensor& taylor_gradient(const PruneConfig& c, std::size_t u, std::size_t i) {
  SB_CHECK(c.gradients, "pruning.importance = \"taylor\" needs the loss's gradients (none were computed)");
  return c.gradients->at(u).at(i);
}

void register_pruner(const std::string& name, const std::string& doc, Pruner p) {
  registry()[name] = p;
  sb::register_name("pruning", name, doc);
}

Pruned prune(const std::string& name, const models::Model& model, const models::UnitTensors& weights,
             const PruneConfig& c) {
  auto it = registry().find(name);
  SB_CHECK(it != registry().end(), "pruning '{}' is unknown (`shardbench keys` lists them)", name);
  SB_CHECK(c.sparsity >= 0 && c.sparsity < 1, "pruning.sparsity must lie in [0, 1), got {}", c.sparsity);
  SB_CHECK(weights.size() == model.units().size(), "prune {}: weights for {} units, model has {}",
           name, weights.size(), model.units().size());
  return it->second(model, weights, c);
}

bool is_prunable(const std::string& name, const std::vector<std::int64_t>& shape) {
  return shape.size() == 2 && !models::is_embedding_table(name);
}

std::int64_t count_nonzero(const models::UnitTensors& w) {
  std::int64_t n = 0;
  for (const auto& u : w)
    for (const auto& t : u) n += t.count_nonzero().item<std::int64_t>();
  return n;
}

}  // namespace sb::prune
