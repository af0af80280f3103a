// The one-process reference trainer: unsharded fp32 parameters, AdamW with a decay mask,
// global grad-norm clipping, warm-up + cosine, gradient accumulation. It is the oracle
// every sharded and compressed layout is compared with, so it is plain and deterministic:
// same seed and batches, same losses bit for bit.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/optim/adamw.h"

namespace sb::train {

struct TrainConfig {
  optim::AdamWConfig adamw;
  std::uint64_t seed = 1234;  // parameter init (models::init_params)
  int threads = 0;            // at::set_num_threads when > 0
  std::string device = "cpu";
  // The training loss per micro-batch (default: the model's loss), as fsdp::Engine::set_loss.
  std::function<torch::Tensor(models::ParamProvider&, const models::Batch&)> loss;
};

struct StepResult {
  std::int64_t step = 0;  // 0-based optimizer step just taken
  double loss = 0;        // mean over micro-batches of each micro-batch's mean loss
  double grad_norm = 0;   // global L2 norm of the accumulated gradient, before clipping
  double clip_coef = 1;   // factor applied to the gradients
  double lr = 0;
  std::int64_t tokens = 0;
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
};

struct EvalResult {
  double loss = 0;        // mean of per-batch mean losses (LM: next token; BERT: MLM + cls)
  double perplexity = 0;  // exp(loss) (meaningful for LM)
  double token_accuracy = std::numeric_limits<double>::quiet_NaN();  // argmax == target over targets != -100
  double classification_accuracy = std::numeric_limits<double>::quiet_NaN();  // BERT with labels
  std::int64_t batches = 0;
};

class ReferenceTrainer {
 public:
  // Initial parameters from models::init_params(model.units(), cfg.seed).
  ReferenceTrainer(models::Model& model, TrainConfig cfg);
  // Explicit initial parameters (e.g. from a checkpoint), [unit][param] in spec shapes.
  ReferenceTrainer(models::Model& model, TrainConfig cfg, models::UnitTensors initial);

  // One optimizer step over micro-batches (equal sizes): the gradient of the mean of their
  // losses, clipped, then AdamW with lr_at(step).
  StepResult step(const std::vector<models::Batch>& micro_batches);
  EvalResult evaluate(const std::vector<models::Batch>& batches);

  const models::UnitTensors& params() const { return params_->tensors(); }
  // Accumulated gradients of the last step, before clipping (for parity tests).
  const models::UnitTensors& last_grads() const { return grads_; }
  models::ParamProvider& provider() { return *params_; }
  std::int64_t steps_done() const { return step_; }
  // As fsdp::Engine::set_masks: the parameters multiplied by masks now and after every step.
  void set_masks(models::UnitTensors masks);

 private:
  models::Model& model_;
  TrainConfig cfg_;
  torch::Device device_;
  std::unique_ptr<models::PersistentParams> params_;
  models::UnitTensors exp_avg_, exp_avg_sq_, decay_, grads_, masks_;
  void apply_masks();
  std::int64_t step_ = 0;
};

}  // namespace sb::train
