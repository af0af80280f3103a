// BERT as published (Devlin et al. 2019; Hugging Face BertForPreTraining/-SequenceClassification):
// word + position + token-type embeddings and LayerNorm, post-LayerNorm encoder with erf-GELU,
// LayerNorm eps 1e-12, tanh pooler, MLM head tied to the word embeddings, and a linear
// sequence-classification head on the pooled output. Dropout (set_dropout, default off) after
// the embeddings' LayerNorm and on each block's attention and FFN outputs before their
// residual LayerNorms, masks independent of the mesh (dropout.h); not on the attention
// probabilities (attention_dropout, naive and chunked variants) and on the pooled output
// before the classifier.
// Units: 0 "embed", 1..L "block.i", L+1 "head" (pooler, MLM transform + bias, classifier;
// re-acquires unit 0 for the tied MLM decoder).
#pragma once
#include <memory>
#include <vector>

#include "workloads/models/attention.h"
#include "workloads/models/dropout.h"
#include "workloads/models/model.h"
#include "workloads/models/stage_provider.h"

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
  // Pipeline stages (pipeline.h) balanced by the weights' FLOPs per row; the last stage holds
  // the heads and a copy of the embedding unit (the MLM decoder is tied to the word embeddings).
  // Training's loss only (classify and MLM logits refuse a cut model).
  std::string pipeline_problem(int stages) const override;
  void set_dropout(const DropoutConfig& d) override;
  void set_activation_checkpoint(const CheckpointConfig& c) override;
  void set_pipeline(int pp, int v, int rank, const std::vector<std::int64_t>& stage_layers = {}) override;
  const PipelineCut& pipeline() const override { return pp_.cut; }
  torch::Tensor stage_forward(ParamProvider& p, int chunk, const Batch& b,
                              const torch::Tensor& input) override;
  std::vector<std::int64_t> stage_activation_shape(const Batch& b) const override;

 private:
  std::vector<UnitSpec> make_units(int tp_rank, int tp_size) const;
  // The embeddings (or `input`, a previous stage's output, when defined) and layers
  // [first, last) (-1: to the end) -> (B*T, d), this rank's rows under sequence parallelism.
  torch::Tensor encode(ParamProvider& p, const Batch& b, std::int64_t first = 0,
                       std::int64_t last = -1, const torch::Tensor& input = {});
  torch::Tensor embed(ParamProvider& p, const Batch& b);  // -> (B*T, d), this rank's rows under sp
  // Layer l on x (no release): its attention masked by m, its residual dropout by rows.
  torch::Tensor block(ParamProvider& p, std::int64_t l, const torch::Tensor& x, std::int64_t B,
                      std::int64_t T, const AttentionMask& m, const DropoutRows& rows);
  // The training loss (MLM and/or classification) from the encoder's output, combined by c.
  torch::Tensor loss_from(ParamProvider& p, torch::Tensor x, const Batch& b, const LossCombiner& c);
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
  Pipelined pp_;
  std::unique_ptr<Attention> attn_;
  ModelDropout dropout_;  // dropout.h: the configuration and the current forward's masks
  CheckpointConfig ac_;   // checkpoint.h: activation checkpointing
  StageProviders stages_;  // stage_forward's providers (stage_provider.h)
};

}  // namespace sb::models
