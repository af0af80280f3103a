// Pruning as a conversion of a model and its weights, like quantization (the Modelcomp
// issue): one file per method (prune_<name>.cpp), chosen by the `pruning` key.
//   magnitude  unstructured: zero the smallest-magnitude weights of the linear layers, to an
//              exact sparsity, over all of them (scope "global") or per matrix ("layer")
//   ffn        structured: remove whole FFN channels (a row of the first FFN matrix, its bias
//              and the matching column of the second) in every block, the least important by
//              weight magnitude; the result is a smaller dense model (d_ff shrinks)
//   heads      structured: remove whole attention heads in every block, likewise (n_head
//              shrinks, head_dim stays)
//   2:4        semi-structured: 2 of every 4 consecutive input weights zeroed (runs dense)
// Embedding tables (GPT-2's wte is also its LM head), biases and LayerNorm are never pruned.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/models/model.h"
#include "workloads/models/params.h"

namespace sb::prune {

struct PruneConfig {
  double sparsity = 0.5;          // fraction of the eligible weights (magnitude) or channels (ffn)
  std::string scope = "global";  // magnitude: "global" or "layer"
  // Channel and head importance (ffn, heads): "magnitude" (the weights alone) or "taylor":
  // |sum over the channel's (head's) parameters of w x dL/dw|, the first-order estimate of
  // the loss change when it is removed (Molchanov et al. 2017), from `gradients`: the loss's
  // gradient summed over calibration batches, [unit][param] like the weights.
  std::string importance = "magnitude";
  const models::UnitTensors* gradients = nullptr;
};

// The importance rule's name check, and the gradient of parameter [u][i] for "taylor".
const torch::Tensor& taylor_gradient(const PruneConfig& c, std::size_t u, std::size_t i);

struct Pruned {
  std::unique_ptr<models::Model> model;  // the model to run (ffn: a smaller configuration)
  models::UnitTensors weights;           // its weights, fp32, spec shapes
  std::int64_t eligible = 0;             // weights (magnitude) or channels (ffn) considered
  std::int64_t removed = 0;              // of those, zeroed or removed
};

using Pruner = Pruned (*)(const models::Model& model, const models::UnitTensors& weights,
                          const PruneConfig& c);
// Registers `name` in the harness name set "pruning" too.
void register_pruner(const std::string& name, const std::string& doc, Pruner p);
// "none" returns a copy of the model's configuration with the same weights.
Pruned prune(const std::string& name, const models::Model& model, const models::UnitTensors& weights,
             const PruneConfig& c);

// Structured pruning's shared steps: the indices of the k largest importances, in their
// original order (ties by position); and the check that the pruned weights have the smaller
// model's spec shapes (at pruning, not at first use), naming `method` in the message.
torch::Tensor most_important(const torch::Tensor& importance, std::int64_t k);
void check_pruned_shapes(const Pruned& p, const std::string& method);

// Whether parameter `name` (a Hugging Face name) is a linear layer's weight that pruning may
// touch: 2-D and not an embedding table.
bool is_prunable(const std::string& name, const std::vector<std::int64_t>& shape);
// Parameters (all) and non-zero parameters of a model's weights.
std::int64_t count_nonzero(const models::UnitTensors& w);

}  // namespace sb::prune
