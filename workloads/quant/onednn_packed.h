// oneDNN's prepacked linear weights (what torch.compile's CPU backend uses): a bf16 weight
// reordered once into oneDNN's blocked layout, then every linear runs on it without
// reordering. LibTorch's plain bf16 addmm takes a fast path only for one row: from two rows
// up it is about 2x slower per call than the prepacked kernel (gpt2 c_fc, 2-32 rows: 0.20-0.25
// ms against 0.11-0.14 ms), which is what a serving batch of a few requests hits every step.
#pragma once
#include <torch/types.h>

namespace sb::quant {

// Whether this LibTorch has the ops (mkldnn::_reorder_linear_weight, _linear_pointwise) and
// oneDNN is enabled.
bool onednn_packing_available();
// w: (out, in) bf16 on the CPU -> the packed weight (an opaque oneDNN tensor).
torch::Tensor onednn_pack(const torch::Tensor& w);
// x: (..., in) bf16 -> (..., out) = x W^T + b (b: (out) bf16 or undefined).
torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& packed, const torch::Tensor& b);

}  // namespace sb::quant
