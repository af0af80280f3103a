// Megatron-LM's tensor-parallel layers (Shoeybi et al. 2019, section 3) over the
// Communicator's tp group (mesh.tp ranks; backend.h Group::Tp), as autograd functions:
//   copy_to_tp(x)      Megatron's "f": forward identity; backward all-reduce of x's gradient
//                      over tp (each rank's column shard contributed part of it)
//   reduce_from_tp(y)  Megatron's "g": forward all-reduce over tp; backward identity
//   column_parallel(x, w, b)   y_r = copy_to_tp(x) @ w_r^T + b_r, with w_r the r-th block of
//                              w's rows (output features) and b_r of b: the output stays
//                              split by features (QKV, the MLP's first projection)
//   row_parallel(x_r, w, b)    y = reduce_from_tp(x_r @ w_r^T) + b, with w_r the r-th block
//                              of w's columns (input features); b replicated and added once,
//                              after the reduction (attention's output, the MLP's second)
// A column-parallel layer followed by a row-parallel one (the MLP, or attention with its heads
// split) does one all-reduce forward and one backward, each of the block's output
// activations (B x T x H). Trace kinds: "tp_act" (forward), "tp_grad" (backward).
// The one-process reference is the same math on the full weights (tests/mpi/tp_layers.cpp).
#pragma once
#include <torch/types.h>

#include "workloads/comm/policy.h"
#include "workloads/models/tensor_parallel.h"

namespace sb::comm { class Communicator; }

namespace sb::parallel {

torch::Tensor copy_to_tp(const torch::Tensor& x, comm::Communicator& c);
torch::Tensor reduce_from_tp(const torch::Tensor& x, comm::Communicator& c);

// w_r: (out / tp, in), b_r: (out / tp) or undefined.
torch::Tensor column_parallel(const torch::Tensor& x, const torch::Tensor& w_r,
                              const torch::Tensor& b_r, comm::Communicator& c);
// x_r: (..., in / tp), w_r: (out, in / tp), b: (out) or undefined (replicated on every tp rank).
torch::Tensor row_parallel(const torch::Tensor& x_r, const torch::Tensor& w_r,
                           const torch::Tensor& b, comm::Communicator& c);

// The block of a full tensor that tp rank `rank` of `size` holds: rows (dim 0) for a
// column-parallel weight or bias, columns (dim 1) for a row-parallel weight. The split must be
// even (the error names the dimension and the tp size).
torch::Tensor column_shard(const torch::Tensor& full, int rank, int size);
torch::Tensor row_shard(const torch::Tensor& full, int rank, int size);

// Megatron's vocabulary-parallel cross-entropy: logits_r (N, V_r) are columns [vocab_begin,
// vocab_begin + V_r) of the full logits; targets (N) full-vocabulary ids, -100 ignored. The
// mean over the kept targets of logsumexp(row) - row[target], in fp32, from two all-reduces
// over tp of N-long vectors (the row maxima; the sums of exponentials with the target's
// logit), never the logits: kind "tp_act". The backward is local: (softmax - onehot) / count
// on this rank's columns.
torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits_r, const torch::Tensor& targets,
                                           std::int64_t vocab_begin, comm::Communicator& c);

// Megatron's sequence-parallel regions over tp (models/tensor_parallel.h): x's rows split in tp
// equal blocks, rank r the r-th. gather_rows_tp: all-gather forward ("tp_act"), reduce-scatter
// of the gradient backward ("tp_grad"); scatter_rows_tp: reduce-scatter forward, all-gather of
// the gradient backward; gathered_linear_tp(x_r, w, b) = linear(gather_rows_tp(x_r), w, b)
// saving x_r only and gathering it again in backward ("tp_act").
torch::Tensor gather_rows_tp(const torch::Tensor& x_r, comm::Communicator& c);
torch::Tensor scatter_rows_tp(const torch::Tensor& x, comm::Communicator& c);
torch::Tensor gathered_linear_tp(const torch::Tensor& x_r, const torch::Tensor& w,
                                 const torch::Tensor& b, comm::Communicator& c);
// All-gather forward; backward this rank's block of the gradient (replicated computation after
// it gives every rank the whole gradient: summing would count it tp times).
torch::Tensor all_rows_tp(const torch::Tensor& x_r, comm::Communicator& c);

// The functions a model's tensor-parallel layout calls (models/tensor_parallel.h) over c's tp
// group. c must outlive the model's use of them.
// sequence_parallel: Megatron's sequence parallelism (tp_sequence_parallel). policy: its
// tp_act and tp_grad compressors run on f's and g's all-reduces (docs/COMPRESSION.md).
models::TensorParallel tensor_parallel(comm::Communicator& c, bool sequence_parallel = false,
                                       const comm::Policy& policy = comm::Policy{});

}  // namespace sb::parallel
