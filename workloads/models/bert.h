// BERT as published (Devlin et al. 2019; Hugging Face BertForPreTraining/-SequenceClassification):
// word + position + token-type embeddings and LayerNorm, post-LayerNorm encoder with erf-GELU,
// LayerNorm eps 1e-12, tanh pooler, MLM head tied to the word embeddings, and a linear
// sequence-classification head on the pooled output. No dropout.
// Units: 0 "embed", 1..L "block.i", L+1 "head" (pooler, MLM transform + bias, classifier;
// re-acquires unit 0 for the tied MLM decoder).
#pragma once
#include <memory>
#include <vector>

#include "workloads/models/attention.h"
#include "workloads/models/model.h"

namespace sb::models {

class Bert final : public Model {
 public:
  explicit Bert(ModelConfig cfg);
  const ModelConfig& config() const override { return cfg_; }
  const std::vector<UnitSpec>& units() const override { return units_; }
  // MLM mean cross-entropy over targets != -100 (if targets defined) plus the classification
  // cross-entropy (if labels defined).
  torch::Tensor loss_with(ParamProvider& p, const Batch& b, const LossCombiner& c) override;
  torch::Tensor logits(ParamProvider& p, const Batch& b) override;    // MLM (B, T, V)
  torch::Tensor classify(ParamProvider& p, const Batch& b) override;  // (B, num_labels)
  TrainFlops train_flops(const Batch& b) const override;

 private:
  torch::Tensor encode(ParamProvider& p, const Batch& b);  // -> (B*T, d)
  ModelConfig cfg_;
  std::vector<UnitSpec> units_;
  std::unique_ptr<Attention> attn_;
};

}  // namespace sb::models
