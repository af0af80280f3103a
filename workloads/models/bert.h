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
  // Megatron's layout (tensor_parallel.h): query, key and value by heads, the intermediate
  // dense by columns, attention.output.dense and output.dense by rows of their input, the word
  // embeddings (and the tied MLM decoder with its bias) by vocabulary range; the embeddings'
  // other tables, every LayerNorm, the pooler, the MLM transform and the classifier replicated.
  // Training's loss and classify; MLM logits and the distillation combiner refuse.
  std::string tensor_parallel_problem(int size) const override;
  void set_tensor_parallel(TensorParallel tp) override;

 private:
  std::vector<UnitSpec> make_units(int tp_rank, int tp_size) const;
  torch::Tensor encode(ParamProvider& p, const Batch& b);  // -> (B*T, d)
  // The word embeddings' rows for ids (B, T, d); under tp this rank's part of their sum over
  // tp (its vocabulary range's rows, zeros for other tokens).
  torch::Tensor word_embedding(const torch::Tensor& table, const torch::Tensor& ids);
  torch::Tensor embed_rows(const std::vector<torch::Tensor>& e, const Batch& b, const torch::Tensor& pos);
  // x through a row-parallel linear under tp (partial products summed, then the bias).
  torch::Tensor row_linear(ParamProvider& p, int u, int w_index, const torch::Tensor& x,
                           const torch::Tensor& w, const torch::Tensor& b);
  ModelConfig cfg_;
  std::vector<UnitSpec> units_;
  std::vector<UnitSpec> whole_units_;  // the unsharded model's (FLOPs count these)
  TensorParallel tp_;
  std::unique_ptr<Attention> attn_;
};

}  // namespace sb::models
