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
#include <utility>
#include <string>
#include <vector>

#include <torch/types.h>

namespace sb::models {

class Attention;
struct AttentionMask;
class ParamProvider;

// activation_checkpoint: none | full (whole blocks; every `every`-th, from block 0) |
// selective (the attention core of every block: scores, softmax, dropout, the product with V;
// what Megatron calls selective recomputation and torchtitan's selective "op" mode approximates)
// | chunked (FPDT's pipeline: every block run and recomputed on seq_chunks chunks of the
// sequence, chunked_block below).
enum class CheckpointMode { None, Full, Selective, Chunked };
struct CheckpointConfig {
  CheckpointMode mode = CheckpointMode::None;
  int every = 1;  // full: block l is recomputed when l % every == 0
  bool block(std::int64_t l) const { return mode == CheckpointMode::Full && l % every == 0; }
  bool attention() const { return mode == CheckpointMode::Selective; }
  bool chunked() const { return mode == CheckpointMode::Chunked; }
};
// "none", "full", "selective", "chunked"; anything else throws naming the choices.
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

// FPDT's pipeline over one block of a causal model (activation_checkpoint = "chunked"; docs/
// FSDP.md "FPDT: the whole block in chunks"). The block runs on the sequence's chunks in order,
// the queries of chunk i attending to the keys and values of chunks 0..i, so no activation of
// the block but its keys and values exists for more than one chunk at once. Forward keeps the
// block's input and every chunk's keys and values until backward: in memory (kv_offload =
// "none") or in a KvStore (kv_store.h: host memory or an O_DIRECT file). Backward walks the chunks in reverse: it recomputes chunk i
// with gradients against the stored keys and values of chunks < i (leaves), back-propagates
// the chunk's output gradient together with what later chunks gave its own keys and values
// (causal: every later chunk is done by then), and adds the gradients of the earlier chunks'
// keys and values to theirs. A unit's gradient thus arrives in one part per chunk; the provider
// sums them (ParamProvider::begin_partial_grads) and sees one gradient, as without chunks.
struct ChunkedBlock {
  // Chunk i's keys and values (B, H, n, Dh) -> the ones its queries attend to.
  using Kv = std::function<std::pair<torch::Tensor, torch::Tensor>(const torch::Tensor& k, const torch::Tensor& v)>;
  // The block on rows x (B n, d): tokens [begin, begin + n) of each of the B sequences, in
  // order; the same function of its inputs, acquired parameters and captured state when run
  // again (RecomputeFn's rule).
  std::function<torch::Tensor(const torch::Tensor& x, std::int64_t begin, std::int64_t n, const Kv& kv)> f;
  std::int64_t B = 1, T = 1;  // x is (B T, d)
  std::int64_t chunks = 1;    // of ceil(T / chunks) tokens (the last may be shorter)
  // Keys and values a token of x gives: 1, or sp inside Ulysses, where f's all-to-all gathers
  // every sp rank's stripe of the chunk (Gpt2::in_chunks), so Kv sees n x kv_scale of them.
  std::int64_t kv_scale = 1;
  std::string kv_offload = "none", dir;  // the KvStore's
};
torch::Tensor chunked_block(ParamProvider& p, ChunkedBlock block, const torch::Tensor& x);

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
