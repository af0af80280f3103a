// "magnitude": unstructured magnitude pruning (Han et al. 2015). Exactly
// round(sparsity x eligible) weights become zero: the smallest |w| over every linear weight
// (scope "global", one threshold for the model) or round(sparsity x size) per matrix (scope
// "layer"). Ties at the threshold are broken by position (a stable sort), so the count is
// exact whatever the values.
#include <cmath>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/family.h"
#include "workloads/prune/pruner.h"

namespace sb::prune {
namespace {

// Zeroes the k smallest-magnitude entries of the concatenation of `ts` (views into clones).
void zero_smallest(std::vector<torch::Tensor*> ts, std::int64_t k) {
  if (k <= 0) return;
  std::vector<torch::Tensor> flat;
  for (auto* t : ts) flat.push_back(t->reshape({-1}).abs());
  auto all = torch::cat(flat);
  auto order = std::get<1>(all.sort(/*stable=*/true, 0, false));  // ascending |w|
  auto mask = torch::ones({all.numel()}, torch::kBool);
  mask.index_fill_(0, order.narrow(0, 0, k), false);
  std::int64_t off = 0;
  for (auto* t : ts) {
    const auto n = t->numel();
    t->mul_(mask.narrow(0, off, n).view(t->sizes()).to(t->scalar_type()));
    off += n;
  }
}

Pruned magnitude(const models::Model& model, const models::UnitTensors& weights, const PruneConfig& c) {
  SB_CHECK(c.scope == "global" || c.scope == "layer", "pruning.scope '{}': use global or layer", c.scope);
  Pruned p;
  p.model = models::family(model.config().family).make(model.config());
  for (const auto& u : weights) {
    auto& dst = p.weights.emplace_back();
    for (const auto& t : u) dst.push_back(t.detach().to(torch::kFloat).clone());
  }
  std::vector<torch::Tensor*> eligible;
  const auto& units = model.units();
  for (std::size_t u = 0; u < units.size(); ++u)
    for (std::size_t i = 0; i < units[u].params.size(); ++i)
      if (is_prunable(units[u].params[i].name, units[u].params[i].shape))
        eligible.push_back(&p.weights[u][i]);
  for (auto* t : eligible) p.eligible += t->numel();
  auto count = [&](std::int64_t n) { return static_cast<std::int64_t>(std::llround(c.sparsity * static_cast<double>(n))); };
  if (c.scope == "global") {
    p.removed = count(p.eligible);
    zero_smallest(eligible, p.removed);
  } else {
    for (auto* t : eligible) {
      zero_smallest({t}, count(t->numel()));
      p.removed += count(t->numel());
    }
  }
  return p;
}

const sb::Registrar kRegister([] {
  register_pruner("magnitude",
                  "unstructured: zero the smallest |w| of the linear weights to exactly "
                  "pruning.sparsity (pruning.scope global or layer)",
                  {.prune = magnitude, .masks = true, .threshold = true});
});

}  // namespace
}  // namespace sb::prune
