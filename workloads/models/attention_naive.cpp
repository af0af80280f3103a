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
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const AttentionMask& mask) const override {
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    auto scores = torch::matmul(q, k.transpose(-2, -1)).mul_(scale);  // (B, H, Tq, Tk)
    auto keep = attention_keep_mask(mask, 0, q.size(2), 0, k.size(2), q.device());
    if (keep.defined()) scores = scores.masked_fill(keep.logical_not(), -INFINITY);
    auto probs = mask.dropout.apply(torch::softmax(scores, -1), 0, q.size(2), k.size(2));
    return torch::matmul(probs, v);  // (B, H, Tq, Dh)
  }
};

const sb::Registrar kRegister([] {
  register_attention("naive",
                     "full (B, H, T, T) score matrix, one softmax",
                     [](std::int64_t) -> std::unique_ptr<Attention> {
                       return std::make_unique<NaiveAttention>();
                     },
                     /*order=*/0);
});

}  // namespace
}  // namespace sb::models
