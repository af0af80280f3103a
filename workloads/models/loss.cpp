// Cross-entropy in fp32 (loss.h).
#include "workloads/models/loss.h"

#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

namespace sb::models {

torch::Tensor widened(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kHalf ? t.to(torch::kFloat) : t;
}

torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                            at::Reduction::Reduction reduction) {
  return at::cross_entropy_loss(widened(logits), targets, {}, reduction, /*ignore_index=*/-100, 0.0);
}

namespace {

// gw (V, d), the fp32 sum over chunks, += gd^T xc in blocks of kLossGradBlockRows vocabulary rows:
// adding a 16-bit product to an fp32 tensor makes an fp32 copy of it first, so one whole
// (V, d) product held it twice more at once (16-bit and fp32: 221 MiB for GPT-2's head in
// bf16, measured as the step's peak; docs/METRICS.md "Memory model"); a block's is 18 MiB.
// Row blocks of gd^T are column blocks of gd, which the GEMM reads in place.
void add_weight_grad(torch::Tensor& gw, const torch::Tensor& gd, const torch::Tensor& xc) {
  const std::int64_t V = gw.size(0);
  for (std::int64_t v = 0; v < V; v += kLossGradBlockRows) {
    const std::int64_t b = std::min(kLossGradBlockRows, V - v);
    gw.narrow(0, v, b).add_(at::mm(gd.narrow(1, v, b).t(), xc));
  }
}

struct LinearCrossEntropy : torch::autograd::Function<LinearCrossEntropy> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& targets, std::int64_t chunk) {
    const bool grads = x.requires_grad() || w.requires_grad();
    const std::int64_t n = x.size(0);
    // fp32 for 16-bit inputs, else their own dtype (double stays double: the gradient check).
    const auto acc = widened(x.narrow(0, 0, 0)).scalar_type();
    const auto terms = (targets != -100).sum().to(acc);  // () the mean's divisor
    auto loss = torch::zeros({}, x.options().dtype(acc));
    torch::Tensor gx, gw;
    // One chunk: the weight's gradient straight from its GEMM in w's dtype (the GEMM sums in
    // fp32 inside); several: summed over chunks in fp32, cast once at the end.
    const bool one_chunk = n <= chunk;
    if (grads) {
      gx = torch::empty_like(x);
      if (!one_chunk) gw = torch::zeros(w.sizes(), w.options().dtype(acc));
    }
    // Per chunk seven passes over its (c, V) logits, two of them reads: the cast to fp32, the
    // row max, x - max and exp in place, the row sum, one multiply that both normalizes and
    // applies the mean's 1/terms (0 on ignored rows), and the cast of the gradient to x's
    // dtype; the ten of logsumexp, sub_, exp_ and mul_ cost 0.6 s more of a 8.8 s bf16 step at
    // B16 x T512. exp_ is LibTorch's accurate exp: its softmax and log_softmax kernels use a
    // faster one whose gradients were 4-7x further from float64's (mean relative error 4e-6).
    for (std::int64_t r = 0; r < n; r += chunk) {
      const std::int64_t c = std::min(chunk, n - r);
      const auto xc = x.narrow(0, r, c), tc = targets.narrow(0, r, c);
      auto logits = at::mm(xc, w.t()).to(acc);  // (c, V)
      const auto valid = tc != -100;
      const auto safe = tc.clamp_min(0).unsqueeze(1);      // ignored rows pick class 0, masked out
      const auto picked = logits.gather(1, safe).squeeze(1);
      const auto mx = logits.amax(1);                      // (c)
      auto e = logits.sub_(mx.unsqueeze(1)).exp_();       // exp(x - max), in place
      const auto sum = e.sum(1);                           // (c)
      const auto lse = mx + sum.log();
      loss.add_(lse.sub(picked).mul_(valid).sum());
      if (!grads) continue;
      // d(mean CE)/d logits = (softmax - one-hot) / terms on counted rows, 0 on ignored ones.
      const auto scale = valid.to(acc).div(terms);        // (c)
      auto g = e.mul_(scale.div(sum).unsqueeze(1));
      g.scatter_add_(1, safe, -scale.unsqueeze(1));
      const auto gd = g.to(x.scalar_type());
      gx.narrow(0, r, c).copy_(at::mm(gd, w));
      if (one_chunk) gw = at::mm(gd.t(), xc);
      else add_weight_grad(gw, gd, xc);
    }
    if (grads) ctx->save_for_backward({gx, gw.to(w.scalar_type())});
    return loss.div_(terms);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list g) {
    const auto saved = ctx->get_saved_variables();
    const auto& up = g[0];  // () the loss's gradient
    // 1 when the loss is the step's only term on one rank (no loss scaling): nothing to scale.
    if (up.is_cpu() && up.item<double>() == 1.0) return {saved[0], saved[1], torch::Tensor(), torch::Tensor()};
    return {saved[0].mul(up.to(saved[0].scalar_type())), saved[1].mul(up.to(saved[1].scalar_type())),
            torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

std::int64_t loss_chunk_rows(std::int64_t vocab) {
  return std::max<std::int64_t>(1, (std::int64_t{1} << 25) / std::max<std::int64_t>(1, vocab));
}

torch::Tensor linear_cross_entropy(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& targets,
                                   std::int64_t chunk_rows) {
  const std::int64_t chunk = chunk_rows > 0 ? chunk_rows : loss_chunk_rows(w.size(0));
  return LinearCrossEntropy::apply(x, w, targets, chunk);
}

}  // namespace sb::models
