// "naive" attention: the full (B, H, Tq, Tk) score matrix and one softmax; the reference
// the other variants are tested against.
#include <cmath>

#include "harness/workload.h"
#include "workloads/models/attention.h"

namespace sb::models {
namespace {

class NaiveAttention final : public Attention {
 public:
  std::string name() const override { return "naive"; }
  bool drops_probabilities() const override { return true; }
  double backward_scores() const override { return 2.0; }
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const AttentionMask& mask) const override {
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const std::int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), Dh = q.size(3);
    auto q3 = q.reshape({B * H, Tq, Dh}), kt = k.reshape({B * H, Tk, Dh}).transpose(1, 2);
    // scores = scale q k^T + bias, bias 0 where a key is kept and -inf where masked: one
    // baddbmm instead of a GEMM, a scaling pass and a masking pass over (B, H, Tq, Tk), and
    // no pass of either in backward (the bias needs no gradient). At B16 x T512 the two
    // passes and their backward cost 0.9 s of a 8.8 s bf16 step.
    auto keep = attention_keep_mask(mask, 0, Tq, 0, Tk, q.device());
    torch::Tensor scores;  // (B H, Tq, Tk)
    if (keep.defined()) {
      auto bias = torch::zeros(keep.sizes(), q.options()).masked_fill_(keep.logical_not(), -INFINITY);
      bias = bias.expand({B, H, Tq, Tk}).reshape({B * H, Tq, Tk});  // a view for a causal mask
      scores = at::baddbmm(bias, q3, kt, /*beta=*/1, /*alpha=*/scale);
    } else {
      scores = at::bmm(q3, kt).mul_(scale);
    }
    auto probs = mask.dropout.apply(torch::softmax(scores.view({B, H, Tq, Tk}), -1), 0, Tq, Tk);
    return torch::matmul(probs, v);  // (B, H, Tq, Dh)
  }
};

const sb::Registrar kRegister([] {
  register_attention("naive",
                     "full (B, H, T, T) score matrix, one softmax",
                     [](const AttentionOptions&) -> std::unique_ptr<Attention> {
                       return std::make_unique<NaiveAttention>();
                     },
                     /*order=*/0);
});

}  // namespace
}  // namespace sb::models
