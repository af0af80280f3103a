// Tensor parallelism as a model sees it (Megatron-LM's layout; docs/FSDP.md "Tensor
// parallelism in the models"). The model keeps no communicator: the training workload hands
// it these functions (workloads/parallel/tp_layers.h builds them over the mesh's tp group), so
// models/ stays free of the communication layer and a one-process model is the same code
// with size 1.
//
// A model sharded over tp holds, for each parameter, the block its ParamSpec::tp names
// (tp_slice below): the heads of QKV and of the attention output's input, the columns of the
// MLP's first projection and the rows of its second, and a contiguous range of the
// vocabulary's rows of the word embedding (GPT-2's, which is also its LM head). LayerNorm,
// position embeddings and the biases added after a row-parallel projection are replicated.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include <torch/types.h>

namespace sb::models {

struct ParamSpec;

struct TensorParallel {
  int rank = 0, size = 1;
  // Megatron's f and g (tp_layers.h): identity forward / all-reduce of the gradient, and
  // all-reduce forward / identity backward.
  std::function<torch::Tensor(const torch::Tensor&)> copy_to, reduce_from;
  // The mean cross-entropy over targets != -100 of logits split by vocabulary: logits_r
  // (N, V_r) are columns [vocab_begin, vocab_begin + V_r) of the full (N, V); targets (N) hold
  // full-vocabulary ids. Never gathers the logits (tp_layers.h vocab_parallel_cross_entropy).
  std::function<torch::Tensor(const torch::Tensor& logits_r, const torch::Tensor& targets,
                              std::int64_t vocab_begin)> cross_entropy;
  // Megatron's sequence parallelism (Korthikanti et al. 2022): between the tensor-parallel
  // regions the (rows, d) activations are split by rows, rank r holding rows [r R, (r+1) R).
  //   gather_rows      all-gather of the row blocks; backward reduce-scatter
  //   scatter_rows     reduce-scatter of partial sums into row blocks; backward all-gather
  //   gathered_linear  linear(gather_rows(x), w, b) keeping only x's block for backward (the
  //                    gather is redone there), so no whole-width input is saved
  //   all_rows         all-gather for computation replicated on every tp rank (BERT's heads):
  //                    each rank's gradient is already the whole one; backward keeps its block
  // A replicated parameter applied to row blocks gets a partial gradient on each rank: the
  // model passes it through copy_to, whose backward sums it over tp.
  bool sequence_parallel = false;
  std::function<torch::Tensor(const torch::Tensor&)> gather_rows, scatter_rows, all_rows;
  std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b)>
      gathered_linear;
  bool on() const { return size > 1; }
  bool rows_split() const { return size > 1 && sequence_parallel; }
  // p as the model uses it on this rank's rows: under sequence parallelism its gradient is
  // summed over tp (copy_to), else p itself.
  torch::Tensor replicated(const torch::Tensor& p) const { return rows_split() ? copy_to(p) : p; }
};

// How a parameter is split over tp (ParamSpec::tp).
enum class TpSplit {
  None,     // replicated
  Rows,     // dim 0 in equal blocks (column-parallel weight or bias)
  Cols,     // dim 1 in equal blocks (row-parallel weight)
  QkvRows,  // dim 0 seen as (3, A): each of Q, K and V split by heads
  Vocab,    // dim 0 in the ranges vocab_range gives (need not divide)
};

// Rows [begin, end) of an n-row table that tp rank `rank` of `size` holds (balanced: sizes
// differ by at most one, so GPT-2's 50,257 tokens split over any tp).
std::pair<std::int64_t, std::int64_t> vocab_range(std::int64_t n, int rank, int size);

// This rank's block of a full parameter (spec.full_shape), as spec.tp says; a copy.
torch::Tensor tp_slice(const ParamSpec& spec, const torch::Tensor& full);
// The inverse: writes `block` (spec.shape's elements, any shape) into its place in `full`
// (spec.full_shape, contiguous). Checkpoints assemble logical tensors with it (any mesh).
void tp_place(const ParamSpec& spec, torch::Tensor& full, const torch::Tensor& block);

// Megatron's layout for a transformer of these sizes over `size` tp ranks: "" when the heads
// and the MLP width divide by size and the vocabulary has a row per rank, else why and the fix.
struct ModelConfig;
std::string megatron_problem(const ModelConfig& c, int size);
// Refuses tp whose functions a model needs but were not set (the sequence-parallel ones when
// tp.sequence_parallel); `all_rows` only where the model asks for it.
void check_functions(const TensorParallel& tp, bool needs_all_rows);

// spec split over tp as `how` for rank/size: shape becomes the block's, full_shape keeps the
// whole one (the error names the parameter and the dimension that does not divide).
ParamSpec tp_split(ParamSpec spec, TpSplit how, int rank, int size);

}  // namespace sb::models
