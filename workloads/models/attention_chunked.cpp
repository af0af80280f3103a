// "chunked" attention: queries processed in chunks so that only (B, H, chunk, Tk) scores
// live at once (the seed's memory_efficient_attention). Causal chunks skip the keys no
// query of the chunk can see. Exactly the naive softmax per row, so equal to it to rounding.
#include <algorithm>
#include <cmath>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/attention.h"

namespace sb::models {
namespace {

class ChunkedAttention final : public Attention {
 public:
  explicit ChunkedAttention(std::int64_t chunk) : chunk_(chunk) {}
  std::string name() const override { return "chunked"; }
  bool drops_probabilities() const override { return true; }
  double executed_scores(bool causal) const override { return causal ? 0.5 : 1.0; }
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const AttentionMask& mask) const override {
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const std::int64_t tk = k.size(2);
    return by_query_chunks(q.size(2), chunk_, [&](std::int64_t s, std::int64_t n) {
      // Causal: the last query of this chunk sees keys up to q_offset + s + n - 1.
      const std::int64_t nk = mask.causal ? std::min(tk, mask.q_offset + s + n) : tk;
      auto qc = q.narrow(2, s, n);                                        // (B, H, n, Dh)
      auto kc = k.narrow(2, 0, nk), vc = v.narrow(2, 0, nk);              // (B, H, nk, Dh)
      auto scores = torch::matmul(qc, kc.transpose(-2, -1)).mul_(scale);  // (B, H, n, nk)
      auto keep = attention_keep_mask(mask, s, n, 0, nk, q.device());
      if (keep.defined()) scores = scores.masked_fill(keep.logical_not(), -INFINITY);
      auto probs = mask.dropout.apply(torch::softmax(scores, -1), s, q.size(2), tk);
      return torch::matmul(probs, vc);  // (B, H, n, Dh)
    });
  }

 private:
  std::int64_t chunk_;
};

const sb::Registrar kRegister([] {
  register_chunked_attention<ChunkedAttention>(
      "chunked", "queries in chunks of 128 (the model's attention_chunk); scores (B, H, 128, T) at a time",
      /*order=*/1);
});

}  // namespace
}  // namespace sb::models
