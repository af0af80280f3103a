// The pruning registry (pruner.h).
#include "workloads/prune/pruner.h"

#include <cmath>

#include "harness/core/check.h"
#include "harness/core/registry.h"
#include "harness/workload.h"
#include "workloads/models/family.h"

namespace sb::prune {
namespace {

Registry<PrunerInfo>& registry() {
  static Registry<PrunerInfo> r("pruning method", "pruning");
  return r;
}

Pruned none(const models::Model& model, const models::UnitTensors& weights, const PruneConfig&) {
  Pruned p;
  p.model = models::family(model.config().family).make(model.config());
  p.weights = weights;
  return p;
}

const sb::Registrar kNone([] {
  // The absence of pruning: the model unchanged, so training may "prune" with it too.
  register_pruner("none", "no pruning", {.prune = none, .masks = true});
});

}  // namespace

torch::Tensor most_important(const torch::Tensor& importance, std::int64_t k) {
  auto order = std::get<1>(importance.sort(/*stable=*/true, 0, /*descending=*/true));
  return std::get<0>(order.narrow(0, 0, k).sort());
}

Pruned prune_structured(
    const std::string& method, const std::string& what, const models::Model& model,
    const models::UnitTensors& weights, double sparsity, std::int64_t n,
    const std::function<void(models::ModelConfig&, std::int64_t kept)>& shrink,
    const std::function<bool(std::size_t u, std::vector<torch::Tensor>& dst, std::int64_t kept)>& block) {
  const auto& cfg = model.config();
  const auto drop = static_cast<std::int64_t>(std::llround(sparsity * static_cast<double>(n)));
  SB_CHECK(drop < n, "pruning {}: sparsity {} removes all {} {}", method, sparsity, n, what);
  models::ModelConfig small = cfg;
  shrink(small, n - drop);
  Pruned p;
  p.model = models::family(cfg.family).make(small);
  for (std::size_t u = 0; u < model.units().size(); ++u) {
    auto& dst = p.weights.emplace_back();
    for (const auto& t : weights[u]) dst.push_back(t.detach().to(torch::kFloat).clone());
    if (!block(u, dst, n - drop)) continue;  // not a block
    p.eligible += n;
    p.removed += drop;
  }
  return p;
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

void register_pruner(const std::string& name, const std::string& doc, PrunerInfo info) {
  SB_CHECK(info.prune, "pruning method '{}' registers no function", name);
  registry().add(name, doc, info);
}

const PrunerInfo& pruner_info(const std::string& name) { return registry().get(name); }
const PrunerInfo* find_pruner(const std::string& name) { return registry().find(name); }

Pruned prune(const std::string& name, const models::Model& model, const models::UnitTensors& weights,
             const PruneConfig& c) {
  const PrunerInfo& info = registry().get(name);
  SB_CHECK(c.sparsity >= 0 && c.sparsity < 1, "pruning.sparsity must lie in [0, 1), got {}", c.sparsity);
  SB_CHECK(weights.size() == model.units().size(), "prune {}: weights for {} units, model has {}",
           name, weights.size(), model.units().size());
  Pruned out = info.prune(model, weights, c);
  if (info.ranks_units) {  // a smaller model: checked here, not at its first use
    SB_CHECK(out.eligible > 0, "pruning {}: model {} has no {} blocks it knows", name,
             model.config().preset, info.blocks);
    check_pruned_shapes(out, name);
  }
  return out;
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
