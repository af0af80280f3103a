// The cross-entropy every training and evaluation loss uses: log-softmax and the mean (or sum)
// over targets computed in fp32 whatever the logits' dtype, as PyTorch's autocast runs
// cross_entropy (its fp32 list). In bf16 the loss itself would be a bf16 number (steps of
// 0.0625 near 11: the recorded losses of gpt2 read 10.875, 10.9375, 11.0); the logits stay
// in the compute dtype, and their gradient comes back in it through the cast.
#pragma once
#include <ATen/core/Reduction.h>
#include <torch/types.h>

namespace sb::models {

// logits (N, C) of any floating dtype; targets (N) int64, -100 = ignored. () fp32 (fp64
// logits: fp64).
torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                            at::Reduction::Reduction reduction = at::Reduction::Mean);

// cross_entropy(x w^T, targets) with mean reduction, computed in row chunks so that the
// (N, V) logits never exist whole: each chunk's logits (fp32), their log-sum-exp, the loss
// terms and the gradient (softmax - one-hot) / terms are formed, and the gradients of x and w
// (through the two GEMMs) are computed in the forward and handed to autograd, which only
// scales them. Same value and gradients as the unfused form up to rounding; on gpt2 at
// B16 x T512 in bf16 the vocabulary's log-softmax, its backward and the casts around them
// took 6.4 s of a 26 s step (docs/PERFORMANCE.md). x (N, d), w (V, d) of one floating dtype;
// targets (N) int64, -100 = ignored. () fp32.
// The rows of linear_cross_entropy's chunks by default: about 32 M logits of a `vocab`-wide head.
std::int64_t loss_chunk_rows(std::int64_t vocab);
torch::Tensor linear_cross_entropy(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& targets,
                                   std::int64_t chunk_rows = 0);  // 0: about 32 M logits a chunk
// With several chunks, the vocabulary rows of w's gradient formed at once in 16 bits (and
// widened to fp32 to be added to the sum): the memory model's loss term counts one such block.
inline constexpr std::int64_t kLossGradBlockRows = 4096;

// 16-bit floating tensors widened to fp32; others as they are.
torch::Tensor widened(const torch::Tensor& t);

}  // namespace sb::models
