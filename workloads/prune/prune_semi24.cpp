// "2:4": semi-structured sparsity, the pattern of NVIDIA's sparse tensor cores (Ampere and
// later; Mishra et al. 2021): in every group of 4 consecutive weights along a linear weight's
// input dimension (shape (out, in)), the 2 of smallest |w| are zeroed (ties by position), so
// every prunable matrix is exactly 50% sparse and every group holds at most 2 non-zeros.
// pruning.sparsity must be 0.5. Only the mask is made here: the matrices run dense (on CPU
// LibTorch has no 2:4 kernel, so its latency is the dense one, reported as such; a GPU run
// would compress them with cuSPARSELt, not wired in: docs/PRUNING.md).
#include <cmath>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/family.h"
#include "workloads/prune/pruner.h"

namespace sb::prune {
namespace {

// Zeroes the 2 smallest |w| of each group of 4 along the last dimension.
void mask_2_of_4(torch::Tensor& w, const std::string& name) {
  SB_CHECK(w.size(-1) % 4 == 0, "2:4 pruning: {} has {} inputs, not a multiple of 4", name, w.size(-1));
  auto groups = w.view({-1, 4});                                           // (out x in/4, 4)
  auto order = std::get<1>(groups.abs().sort(/*stable=*/true, -1, false));  // ascending |w|
  auto keep = torch::ones_like(groups, torch::kBool).scatter_(1, order.narrow(1, 0, 2), false);
  groups.mul_(keep.to(groups.scalar_type()));
}

Pruned semi24(const models::Model& model, const models::UnitTensors& weights, const PruneConfig& c) {
  SB_CHECK(std::abs(c.sparsity - 0.5) < 1e-12, "pruning = \"2:4\" is 50% sparse by construction; "
           "pruning.sparsity is {} (set it to 0.5)", c.sparsity);
  Pruned p;
  p.model = models::family(model.config().family).make(model.config());
  const auto& units = model.units();
  for (std::size_t u = 0; u < units.size(); ++u) {
    auto& dst = p.weights.emplace_back();
    for (std::size_t i = 0; i < units[u].params.size(); ++i) {
      auto t = weights[u][i].detach().to(torch::kFloat).clone();
      if (is_prunable(units[u].params[i].name, units[u].params[i].shape)) {
        mask_2_of_4(t, units[u].params[i].name);
        p.eligible += t.numel();
        p.removed += t.numel() / 2;
      }
      dst.push_back(t);
    }
  }
  return p;
}

const sb::Registrar kRegister([] {
  register_pruner("2:4",
                  "semi-structured: in every 4 consecutive input weights of a linear layer, the 2 "
                  "smallest |w| zeroed (50%); runs dense on CPU",
                  {.prune = semi24, .masks = true, .fixed_sparsity = 0.5});
});

}  // namespace
}  // namespace sb::prune
