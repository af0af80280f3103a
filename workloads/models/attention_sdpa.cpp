// "sdpa" attention: LibTorch's fused at::scaled_dot_product_attention (flash attention on
// CPU and GPU, or the memory-efficient / cuDNN kernels on GPU, picked by LibTorch per call).
// Causal self-attention without a KV cache takes its is_causal path (no mask tensor); a cache
// offset or padded keys pass the same boolean "may attend" mask the other variants use.
// Checked against naive in outputs and gradients (tests/unit/models_attention.cpp).
#include <ATen/ops/scaled_dot_product_attention.h>

#include "harness/workload.h"
#include "workloads/models/attention.h"

namespace sb::models {
namespace {

class SdpaAttention final : public Attention {
 public:
  std::string name() const override { return "sdpa"; }
  // Measured: at gpt2-long B1 x T4096 bf16 the step's peak was 1.73 GiB with sdpa and 6.45 GiB
  // with naive (docs/PERFORMANCE.md "Activation checkpointing").
  double kept_scores(bool) const override { return 0.0; }
  double executed_scores(bool causal) const override { return causal ? 0.5 : 1.0; }
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const AttentionMask& mask) const override {
    const bool plain_causal = mask.causal && mask.q_offset == 0 && q.size(2) == k.size(2) &&
                              !mask.key_keep.defined();
    if (plain_causal) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, true);
    auto keep = attention_keep_mask(mask, 0, q.size(2), 0, k.size(2), q.device());
    std::optional<torch::Tensor> m;
    if (keep.defined()) m = keep;  // bool: true = may attend
    return at::scaled_dot_product_attention(q, k, v, m, 0.0, false);  // (B, H, Tq, Dh)
  }
};

const sb::Registrar kRegister([] {
  register_attention("sdpa",
                     "LibTorch's fused scaled_dot_product_attention (flash / memory-efficient "
                     "kernels, chosen by LibTorch)",
                     [](const AttentionOptions&) -> std::unique_ptr<Attention> {
                       return std::make_unique<SdpaAttention>();
                     },
                     /*order=*/3);
});

}  // namespace
}  // namespace sb::models
