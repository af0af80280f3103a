// Activation checkpointing (the Longctx issue; docs/FSDP.md "Activation checkpointing"): a
// block's (or only its attention core's) forward keeps none of its intermediate activations;
// backward runs it again with gradients on and back-propagates through the recomputation
// (torch.utils.checkpoint's reentrant form). The parameters the recomputation acquires get
// their gradients as they do without checkpointing: the FSDP engine's post-accumulate hook
// reduces them, and its pre-backward hook on the block's output re-gathers a sharded unit
// before the recomputation needs it. Dropout replays: its masks are keyed by token and site
// (dropout.h), so the recomputation draws the same ones.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

namespace sb::models {

class Attention;
struct AttentionMask;
class ParamProvider;

// activation_checkpoint: none | full (whole blocks; every `every`-th, from block 0) |
// selective (the attention core of every block: scores, softmax, dropout, the product with V;
// what Megatron calls selective recomputation and torchtitan's selective "op" mode approximates).
enum class CheckpointMode { None, Full, Selective };
struct CheckpointConfig {
  CheckpointMode mode = CheckpointMode::None;
  int every = 1;  // full: block l is recomputed when l % every == 0
  bool block(std::int64_t l) const { return mode == CheckpointMode::Full && l % every == 0; }
  bool attention() const { return mode == CheckpointMode::Selective; }
};
// "none", "full", "selective"; anything else throws naming the choices.
CheckpointMode checkpoint_mode_from_name(const std::string& name);

// f(inputs) with only the inputs saved for backward. f must compute the same thing when run
// again: a function of its inputs, of the parameters it acquires from p, and of state it
// captured by value (never a member that a later forward changes). Outside autograd (no
// gradient mode, or no input requiring a gradient) it is f(inputs).
using RecomputeFn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;
torch::Tensor checkpointed(ParamProvider& p, RecomputeFn f, const std::vector<torch::Tensor>& inputs);

// attn on (q, k, v) under mask m; with recompute (selective checkpointing) only q, k and v are
// kept for backward and the scores, softmax and dropout are recomputed there. attn must live
// until backward (a model's variant does).
torch::Tensor attend(const Attention& attn, ParamProvider& p, const torch::Tensor& q, const torch::Tensor& k,
                     const torch::Tensor& v, const AttentionMask& m, bool recompute);

// RAII: acquires and releases inside are a recomputation's (ParamProvider::begin_recompute).
class RecomputeScope {
 public:
  explicit RecomputeScope(ParamProvider& p);
  ~RecomputeScope();
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;

 private:
  ParamProvider& p_;
};

}  // namespace sb::models
