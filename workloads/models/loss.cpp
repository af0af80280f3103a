// Cross-entropy in fp32 (loss.h).
#include "workloads/models/loss.h"

namespace sb::models {

torch::Tensor widened(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kHalf ? t.to(torch::kFloat) : t;
}

torch::Tensor cross_entropy(const torch::Tensor& logits, const torch::Tensor& targets,
                            at::Reduction::Reduction reduction) {
  return at::cross_entropy_loss(widened(logits), targets, {}, reduction, /*ignore_index=*/-100, 0.0);
}

}  // namespace sb::models
