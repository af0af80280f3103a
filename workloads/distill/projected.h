// TinyBERT's hidden-state loss across widths: a student whose last hidden states (width d_s)
// are matched to a wider or narrower teacher's (d_t) through a learned projection W (d_t, d_s),
// trained with the student. The projection is one more unit of the student ("distill_proj",
// parameter distill.proj.weight), so the FSDP engine shards, gathers and optimizes it like
// any other; it is not part of the model: exports write the inner model only.
#pragma once
#include <memory>

#include "workloads/models/model.h"

namespace sb::distill {

class ProjectedStudent final : public models::Model {
 public:
  ProjectedStudent(std::unique_ptr<models::Model> inner, std::int64_t teacher_width);
  const models::ModelConfig& config() const override { return inner_->config(); }
  const std::vector<models::UnitSpec>& units() const override { return units_; }
  // The inner model's loss; when the combiner asks for hidden states, they reach it projected
  // to the teacher's width (h W^T).
  torch::Tensor loss_with(models::ParamProvider& p, const models::Batch& b, const models::LossCombiner& c) override;
  torch::Tensor logits(models::ParamProvider& p, const models::Batch& b) override { return inner_->logits(p, b); }
  torch::Tensor classify(models::ParamProvider& p, const models::Batch& b) override { return inner_->classify(p, b); }
  // The inner model's, plus the projection on every position (it exists only for the hidden loss).
  models::TrainFlops train_flops(const models::Batch& b) const override;
  const models::Model& inner() const { return *inner_; }

 private:
  std::unique_ptr<models::Model> inner_;
  std::vector<models::UnitSpec> units_;
};

}  // namespace sb::distill
