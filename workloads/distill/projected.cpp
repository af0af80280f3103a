// The projected student (projected.h).
#include "workloads/distill/projected.h"

namespace sb::distill {

ProjectedStudent::ProjectedStudent(std::unique_ptr<models::Model> inner, std::int64_t teacher_width)
    : inner_(std::move(inner)), units_(inner_->units()) {
  models::ParamSpec w{"distill.proj.weight", {teacher_width, inner_->config().d_model}};
  units_.push_back({"distill_proj", {w}});
}

torch::Tensor ProjectedStudent::loss_with(models::ParamProvider& p, const models::Batch& b,
                                          const models::LossCombiner& c) {
  if (!c.combine || !c.hidden) return inner_->loss_with(p, b, c);
  const int unit = static_cast<int>(units_.size()) - 1;
  models::LossCombiner projected;
  projected.hidden = true;
  projected.combine = [&](const models::LossParts& parts) {
    models::LossParts q = parts;
    auto w = p.acquire(unit);
    q.hidden = at::linear(parts.hidden, w[0].to(parts.hidden.scalar_type()));  // (B*T, d_t)
    auto loss = c.combine(q);
    p.release(unit, loss);  // gathered again when backward reaches the loss
    return loss;
  };
  return inner_->loss_with(p, b, projected);
}

models::TrainFlops ProjectedStudent::train_flops(const models::Batch& b) const {
  auto f = inner_->train_flops(b);
  const auto proj = models::unit_flops_per_row(units_.back());  // (d_t, d_s), no bias
  f.matmul += static_cast<double>(b.input_ids.numel()) * proj.matmul;
  f.counted += "; the distillation projection of the hidden states on every position";
  return f;
}

}  // namespace sb::distill
