// "ffn": structured pruning of FFN channels. In every block, channel j of the FFN is row j of
// the first matrix (with bias j) and column j of the second; it is removed whole, so the
// result is a smaller dense model (d_ff' = d_ff - round(sparsity x d_ff), the same in every
// block) whose matmuls really are smaller. Importance of channel j (pruning.importance):
// magnitude ||W_out[:, j]|| x sqrt(||W_in[j, :]||^2 + b_j^2), or taylor |sum of w x dL/dw
// over W_in[j, :], b_j and W_out[:, j]|; either way a channel whose output column is zero
// contributes exactly nothing and goes first (tests/unit/prune_models.cpp builds one).
#include <cmath>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/family.h"
#include "workloads/prune/pruner.h"

namespace sb::prune {
namespace {

struct FfnParams {
  int in_w = -1, in_b = -1, out_w = -1;  // indices within the block unit
};

// GPT-2: mlp.c_fc.{weight,bias}, mlp.c_proj.weight; BERT: intermediate.dense.{weight,bias},
// output.dense.weight (not attention.output.dense.weight).
FfnParams ffn_params(const models::UnitSpec& u) {
  FfnParams f;
  for (int i = 0; i < static_cast<int>(u.params.size()); ++i) {
    const std::string& n = u.params[i].name;
    using models::ends_with;
    if (ends_with(n, "mlp.c_fc.weight") || ends_with(n, "intermediate.dense.weight")) f.in_w = i;
    if (ends_with(n, "mlp.c_fc.bias") || ends_with(n, "intermediate.dense.bias")) f.in_b = i;
    if (ends_with(n, "mlp.c_proj.weight") ||
        (ends_with(n, ".output.dense.weight") && n.find("attention.") == std::string::npos))
      f.out_w = i;
  }
  return f;
}

Pruned ffn(const models::Model& model, const models::UnitTensors& weights, const PruneConfig& c) {
  const auto& units = model.units();
  return prune_structured("ffn", "FFN channels", model, weights, c.sparsity, model.config().d_ff,
                          [](models::ModelConfig& small, std::int64_t kept) { small.d_ff = kept; },
                          [&](std::size_t u, std::vector<torch::Tensor>& dst, std::int64_t kept) {
    const FfnParams f = ffn_params(units[u]);
    if (f.in_w < 0) return false;  // not a block
    SB_CHECK(f.in_b >= 0 && f.out_w >= 0, "pruning ffn: unit {} has an FFN input matrix but no bias "
             "or output matrix", units[u].name);
    const auto& w_in = dst[f.in_w];    // (d_ff, d)
    const auto& b_in = dst[f.in_b];    // (d_ff)
    const auto& w_out = dst[f.out_w];  // (d, d_ff)
    torch::Tensor importance;  // (d_ff)
    if (c.importance == "taylor") {
      const auto& g_in = taylor_gradient(c, u, f.in_w);
      const auto& g_b = taylor_gradient(c, u, f.in_b);
      const auto& g_out = taylor_gradient(c, u, f.out_w);
      importance = ((w_in * g_in).sum(1) + b_in * g_b + (w_out * g_out).sum(0)).abs();
    } else {
      importance = w_out.norm(2, {0}) * (w_in.pow(2).sum(1) + b_in.pow(2)).sqrt();
    }
    const auto keep = most_important(importance, kept);
    dst[f.in_w] = w_in.index_select(0, keep).contiguous();
    dst[f.in_b] = b_in.index_select(0, keep).contiguous();
    dst[f.out_w] = w_out.index_select(1, keep).contiguous();
    return true;
  });
}

const sb::Registrar kRegister([] {
  register_pruner("ffn",
                  "structured: remove the least important FFN channels (pruning.sparsity of d_ff "
                  "in every block): a smaller dense model",
                  {.prune = ffn, .ranks_units = true, .blocks = "FFN"});
});

}  // namespace
}  // namespace sb::prune
