// The model-shape advisor (the Codesign issue; docs/MODELS.md "Shapes"): the GEMMs one
// training step of a GPT-2-family model runs, and the neighbouring shapes (hidden size,
// heads, head size, MLP width, vocabulary padding) whose parameter count stays within a
// tolerance of the model's. `shardbench shapes` (cmd_shapes.cpp) times every distinct GEMM on
// this machine and ranks the shapes by the summed time.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/models/model.h"

namespace sb::models {

// One GEMM shape of a step: batch x (m x k) by (k x n), `count` times a step, its operands laid
// out as the model holds them: a_t = A is the transpose of a contiguous (k x m) (a weight
// gradient's dY^T), b_t = B is the transpose of a contiguous (n x k) (a linear's weight, K in
// Q K^T). A GEMM library's speed for odd sizes depends on which dimension is contiguous.
struct Gemm {
  std::string what;  // "mlp.c_fc forward", ...
  std::int64_t batch = 1, m = 0, k = 0, n = 0, count = 1;
  bool lm_head = false;   // the tied LM head's: a training step times them inside "lm_head" below
  bool backward = false;  // a gradient's (input or weight grad, attention backward)
  bool a_t = false, b_t = false;
  double flops() const { return 2.0 * static_cast<double>(batch * m * k * n); }
};

// A training step's GEMMs on B rows of T tokens: each linear layer forward (x W^T), its
// input gradient and its weight gradient, per block x n_layer; the attention core as naive
// attention runs it (Q K^T and P V forward, four batched products backward, B x heads
// batches); the tied LM head's three. Dense GPT-2 blocks (an MoE model's experts are not
// modelled).
// naive_attention = false: the attention core is one fused kernel (step_kernels' "sdpa"), so
// its six batched products are not listed.
std::vector<Gemm> step_gemms(const ModelConfig& c, std::int64_t B, std::int64_t T, bool naive_attention = true);

// The rest of a step, each kernel timed as the operator the model runs, forward and backward
// together (an inference pass: forward only; shapes_workload.cpp times them): `op` is one of
//   layernorm (rows x width), gelu (tanh; rows x width), softmax_causal (naive attention's
//   masked softmax: batch x rows x rows), sdpa (fused attention: batch x heads x rows x
//   width per head), lm_head (the tied LM head with its loss as the model runs them,
//   linear_cross_entropy: rows x width by classes x width, its three GEMMs and the
//   cross-entropy in row chunks), add (rows x width, forward only),
//   sum_rows (a bias gradient: rows x width), norm (the squares of width gradient elements
//   summed in fp32), adamw (width elements of fp32 master weights, gradients and moments),
//   cast (width elements fp32 -> the compute dtype, and a gradient back).
struct VectorKernel {
  std::string what, op;
  std::int64_t batch = 1, heads = 1, rows = 0, width = 0, count = 1, classes = 0;
  bool backward = true;     // timed with its backward (false: forward only, "|fwd" in the key)
  // How many of these the step's one stands for: a per-parameter kernel (AdamW, the norm, the
  // casts) streams its elements, so it is timed on kStreamedElements and counts P / that.
  double scale = 1;
  std::string key() const;  // "op|batch|heads|rows|width[|classes][|fwd]": one timing per distinct kernel
};
// The per-parameter kernels' timed size: 64 MB in fp32, past any cache (and one timing for
// every shape and model).
constexpr std::int64_t kStreamedElements = std::int64_t{1} << 24;
// Per training step on B rows of T tokens: 2 L + 1 layer norms, L GELUs, L attention
// softmaxes (naive) or fused attentions, the LM head with its cross-entropy, 2 L residual adds,
// the four linears' bias gradients per block, and over the P = `params` parameters one AdamW
// update, one gradient norm and, below fp32, the casts of weights and gradients (each scaled). Per inference pass
// (training = false): the layer norms, GELUs, softmaxes or fused attentions and residual adds,
// forward only (the logits are the LM head's forward GEMM; no loss, no optimizer). Embedding
// lookups and their gradient (M rows of d) are left out (under 0.1% of a GPT-2 step).
std::vector<VectorKernel> step_vector_kernels(const ModelConfig& c, std::int64_t B, std::int64_t T,
                                              std::int64_t params, bool naive_attention, bool low_precision,
                                              bool training = true);

struct ShapeCandidate {
  ModelConfig cfg;
  std::int64_t params = 0;
  std::string change;  // "d 1000 -> 1024, heads 10 -> 16, d_ff 4000 -> 3840, vocab 50257 -> 50304"
};

// The model itself first, then every shape with d' a multiple of 64 within 256 of d, heads
// giving a head size of 64 or 128 (or the model's heads where they divide d'), the MLP width
// solved (a multiple of 64) to keep the parameter count and kept within 3 to 5 times d' (a
// GPT-2 block, not MLP traded for attention), and the vocabulary as it is or
// padded to a multiple of 64 or 128; those within `tolerance` (relative) of the model's
// parameter count, the family's constraints (heads divide d) kept. GPT-2-family models only.
std::vector<ShapeCandidate> neighbour_shapes(const ModelConfig& c, double tolerance);

// Why a dimension does not tile this machine's matrix units: "" or a reason per dimension not
// a multiple of 64 ("d 1000 % 64 = 40").
std::string tiling_notes(const ModelConfig& c);

}  // namespace sb::models
