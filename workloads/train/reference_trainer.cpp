// Reference trainer: forward/backward per micro-batch, clipping, AdamW, evaluation.
#include "workloads/train/reference_trainer.h"

#include <ATen/Parallel.h>
#include <chrono>
#include <cmath>
#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"

namespace sb::train {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

ReferenceTrainer::ReferenceTrainer(models::Model& model, TrainConfig cfg)
    : ReferenceTrainer(model, cfg, models::init_params(model.units(), cfg.seed)) {}

ReferenceTrainer::ReferenceTrainer(models::Model& model, TrainConfig cfg, models::UnitTensors initial)
    : model_(model), cfg_(std::move(cfg)), device_(cfg_.device) {
  if (cfg_.threads > 0) at::set_num_threads(cfg_.threads);
  const auto& units = model_.units();
  SB_CHECK(initial.size() == units.size(), "initial parameters have {} units, model '{}' has {}",
           initial.size(), model_.config().preset, units.size());
  for (std::size_t u = 0; u < units.size(); ++u) {
    SB_CHECK(initial[u].size() == units[u].params.size(), "unit {} ('{}'): {} tensors given, {} expected",
             u, units[u].name, initial[u].size(), units[u].params.size());
    std::vector<torch::Tensor> m, v, d;
    for (std::size_t i = 0; i < units[u].params.size(); ++i) {
      const auto& spec = units[u].params[i];
      auto& t = initial[u][i];
      SB_CHECK(t.sizes().vec() == spec.shape, "parameter '{}' has shape ({}), the model expects ({})",
               spec.name, fmt::join(t.sizes(), ", "), fmt::join(spec.shape, ", "));
      t = t.to(device_, torch::kFloat32).contiguous();
      m.push_back(torch::zeros_like(t));
      v.push_back(torch::zeros_like(t));
      // Decay is a per-tensor property here; a full mask keeps one adamw_update code path
      // for whole tensors and flat shards.
      d.push_back(spec.decay ? torch::Tensor() : torch::zeros_like(t));
    }
    exp_avg_.push_back(std::move(m)), exp_avg_sq_.push_back(std::move(v)), decay_.push_back(std::move(d));
  }
  params_ = std::make_unique<models::PersistentParams>(std::move(initial));
}

StepResult ReferenceTrainer::step(const std::vector<models::Batch>& micro_batches) {
  SB_CHECK(!micro_batches.empty(), "step: no micro-batches given");
  StepResult r;
  r.step = step_;
  auto& ps = params_->tensors();
  params_->zero_grad();
  const double inv = 1.0 / static_cast<double>(micro_batches.size());
  double loss_sum = 0;
  for (const auto& mb : micro_batches) {
    auto t0 = Clock::now();
    auto loss = cfg_.loss ? cfg_.loss(*params_, mb) : model_.loss(*params_, mb);
    r.forward_s += since(t0);
    t0 = Clock::now();
    (loss * inv).backward();
    r.backward_s += since(t0);
    loss_sum += loss.item<double>();
    r.tokens += mb.tokens();
  }
  r.loss = loss_sum * inv;

  auto t0 = Clock::now();
  grads_.assign(ps.size(), {});
  double sq = 0;
  for (std::size_t u = 0; u < ps.size(); ++u)
    for (auto& p : ps[u]) {
      // A parameter unused by this batch (e.g. the classifier in pure MLM) has zero gradient.
      auto g = p.grad().defined() ? p.grad() : torch::zeros_like(p);
      grads_[u].push_back(g);
      const double n = g.norm().item<double>();  // CPU norm accumulates fp32 in double
      sq += n * n;
    }
  r.grad_norm = std::sqrt(sq);
  r.clip_coef = optim::clip_coefficient(r.grad_norm, cfg_.adamw.grad_clip);
  r.lr = optim::lr_at(cfg_.adamw, step_);
  torch::NoGradGuard no_grad;
  for (std::size_t u = 0; u < ps.size(); ++u)
    for (std::size_t i = 0; i < ps[u].size(); ++i) {
      auto g = r.clip_coef < 1.0 ? grads_[u][i] * r.clip_coef : grads_[u][i];
      auto p = ps[u][i].detach();
      optim::adamw_update(p, g, exp_avg_[u][i], exp_avg_sq_[u][i], step_ + 1, r.lr, cfg_.adamw, decay_[u][i]);
    }
  apply_masks();
  r.optimizer_s = since(t0);
  ++step_;
  return r;
}

void ReferenceTrainer::set_masks(models::UnitTensors masks) {
  masks_ = std::move(masks);
  apply_masks();
}

void ReferenceTrainer::apply_masks() {
  torch::NoGradGuard no_grad;
  auto& ps = params_->tensors();
  for (std::size_t u = 0; u < masks_.size(); ++u)
    for (std::size_t i = 0; i < masks_[u].size(); ++i) ps[u][i].detach().mul_(masks_[u][i].to(ps[u][i].options()));
}

EvalResult ReferenceTrainer::evaluate(const std::vector<models::Batch>& batches) {
  torch::NoGradGuard no_grad;
  EvalResult e;
  double loss = 0, correct = 0, counted = 0, cls_correct = 0, cls_counted = 0;
  for (const auto& b : batches) {
    loss += model_.loss(*params_, b).item<double>();
    if (b.targets.defined()) {
      auto pred = model_.logits(*params_, b).argmax(-1);  // (B, T)
      auto valid = b.targets != -100;
      correct += ((pred == b.targets) & valid).sum().item<double>();
      counted += valid.sum().item<double>();
    }
    if (b.labels.defined()) {
      auto pred = model_.classify(*params_, b).argmax(-1);  // (B)
      cls_correct += (pred == b.labels).sum().item<double>();
      cls_counted += static_cast<double>(b.labels.numel());
    }
    ++e.batches;
  }
  SB_CHECK(e.batches > 0, "evaluate: no batches given");
  e.loss = loss / static_cast<double>(e.batches);
  e.perplexity = std::exp(e.loss);
  if (counted > 0) e.token_accuracy = correct / counted;
  if (cls_counted > 0) e.classification_accuracy = cls_correct / cls_counted;
  return e;
}

}  // namespace sb::train
