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
#include <functional>
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

// What a method is, which the pruning keys' rules ask (prune_keys.cpp) instead of its name.
struct PrunerInfo {
  Pruner prune = nullptr;
  // Train can prune gradually with it: it zeroes weights in place (masks), the model keeps its
  // shape. Structured methods make a smaller model, which infer exports and train then loads.
  bool masks = false;
  // Sparse by construction at this fraction (2:4: 0.5); 0: pruning.sparsity chooses.
  double fixed_sparsity = 0;
  // Removes whole channels or heads ranked by pruning.importance (magnitude or taylor), in the
  // blocks named here ("FFN", "attention"): prune() checks that some were found and that the
  // weights have the smaller model's shapes.
  bool ranks_units = false;
  const char* blocks = "";
  // Zeroes single weights by a magnitude threshold: pruning.scope sets the threshold's reach
  // and pruning.kernel may store the result sparsely (CSR) where that is faster.
  bool threshold = false;
};
// Registers `name` (a duplicate fails at start-up) in the harness name set "pruning" too.
void register_pruner(const std::string& name, const std::string& doc, PrunerInfo info);
// The record of a registered method; an unknown name lists the known ones.
const PrunerInfo& pruner_info(const std::string& name);
const PrunerInfo* find_pruner(const std::string& name);  // nullptr when unknown
// "none" returns a copy of the model's configuration with the same weights.
Pruned prune(const std::string& name, const models::Model& model, const models::UnitTensors& weights,
             const PruneConfig& c);

// Structured pruning's frame (ffn, heads): of the n units (channels, heads) of every block,
// round(sparsity x n) are removed (removing all is refused, naming `what`); `shrink` gives the
// smaller model's configuration the kept count; every unit's weights are copied to fp32 and
// `block` cuts a block's in place down to `kept` units (false: the unit is no block). The
// result counts n per block as eligible and the dropped ones as removed.
Pruned prune_structured(
    const std::string& method, const std::string& what, const models::Model& model,
    const models::UnitTensors& weights, double sparsity, std::int64_t n,
    const std::function<void(models::ModelConfig&, std::int64_t kept)>& shrink,
    const std::function<bool(std::size_t u, std::vector<torch::Tensor>& dst, std::int64_t kept)>& block);

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
