// "online" attention: query chunks x key chunks with a running max and running sum
// (flash-attention's online softmax), so no score block larger than (chunk, chunk) exists.
// Masked scores use a large finite negative instead of -inf so a fully masked key chunk
// gives weights exp(-huge) = 0 rather than NaN; a row's running state is rescaled by
// exp(m_old - m_new) when a real key appears, which wipes anything accumulated before.
#include <algorithm>
#include <cmath>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/attention.h"

namespace sb::models {
namespace {

constexpr double kMasked = -1e30;

class OnlineAttention final : public Attention {
 public:
  explicit OnlineAttention(std::int64_t chunk) : chunk_(chunk) {}
  std::string name() const override { return "online"; }
  double kept_scores(bool causal) const override { return causal ? 0.5 : 1.0; }
  double executed_scores(bool causal) const override { return causal ? 0.5 : 1.0; }
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const AttentionMask& mask) const override {
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const std::int64_t tk = k.size(2);
    return by_query_chunks(q.size(2), chunk_, [&](std::int64_t s, std::int64_t n) {
      const std::int64_t kend = mask.causal ? std::min(tk, mask.q_offset + s + n) : tk;
      auto qc = q.narrow(2, s, n).mul(scale);  // (B, H, n, Dh)
      torch::Tensor m, l, acc;                 // (B, H, n, 1), (B, H, n, 1), (B, H, n, Dh)
      for (std::int64_t j = 0; j < kend; j += chunk_) {
        const std::int64_t nk = std::min(chunk_, kend - j);
        auto sc = torch::matmul(qc, k.narrow(2, j, nk).transpose(-2, -1));  // (B, H, n, nk)
        auto keep = attention_keep_mask(mask, s, n, j, nk, q.device());
        if (keep.defined()) sc = sc.masked_fill(keep.logical_not(), kMasked);
        auto cm = std::get<0>(sc.max(-1, /*keepdim=*/true));  // (B, H, n, 1)
        auto vc = v.narrow(2, j, nk);
        if (!m.defined()) {
          m = cm;
          auto p = torch::exp(sc - m);
          l = p.sum(-1, true);
          acc = torch::matmul(p, vc);
        } else {
          auto mn = torch::maximum(m, cm);
          auto alpha = torch::exp(m - mn);
          auto p = torch::exp(sc - mn);
          l = l * alpha + p.sum(-1, true);
          acc = acc * alpha + torch::matmul(p, vc);
          m = mn;
        }
      }
      return acc / l;
    });
  }

 private:
  std::int64_t chunk_;
};

const sb::Registrar kRegister([] {
  register_chunked_attention<OnlineAttention>(
      "online", "query and key chunks with an online (running max) softmax; no (chunk, T) scores",
      /*order=*/2);
});

}  // namespace
}  // namespace sb::models
