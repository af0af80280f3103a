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

// 16-bit floating tensors widened to fp32; others as they are.
torch::Tensor widened(const torch::Tensor& t);

}  // namespace sb::models
