// The provider a pipeline stage's forward sees (pipeline.h): the model addresses its units by
// their index in the whole model (embed 0, block l at l + 1, head n_layer + 1); the engine holds
// only this rank's, so every call is forwarded with the index mapped (StageUnits::local).
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "harness/core/check.h"
#include "workloads/models/model.h"

namespace sb::models {

class StageProvider final : public ParamProvider {
 public:
  StageProvider(ParamProvider& inner, const std::vector<int>& local) : p_(inner), local_(local) {}
  std::vector<torch::Tensor> acquire(int u) override { return p_.acquire(at(u)); }
  void release(int u, const torch::Tensor& out) override { p_.release(at(u), out); }
  torch::Tensor linear(int u, int i, const torch::Tensor& x, const torch::Tensor& w,
                       const torch::Tensor& b) override {
    return p_.linear(at(u), i, x, w, b);
  }
  void begin_recompute() override { p_.begin_recompute(); }
  void end_recompute() override { p_.end_recompute(); }
  void begin_partial_grads() override { p_.begin_partial_grads(); }
  void end_partial_grads() override { p_.end_partial_grads(); }
  torch::Tensor linear_gelu(int u, int i, const torch::Tensor& x, const torch::Tensor& w,
                            const torch::Tensor& b, c10::string_view approximate) override {
    return p_.linear_gelu(at(u), i, x, w, b, approximate);
  }
  torch::Tensor linear_cross_entropy(int u, int i, const torch::Tensor& x, const torch::Tensor& w,
                                     const torch::Tensor& targets) override {
    return p_.linear_cross_entropy(at(u), i, x, w, targets);
  }

 private:
  int at(int u) const {
    SB_CHECK(u >= 0 && u < static_cast<int>(local_.size()) && local_[u] >= 0,
             "pipeline stage: the model's unit {} is not held by this rank's stages", u);
    return local_[u];
  }
  ParamProvider& p_;
  const std::vector<int>& local_;
};

// One StageProvider per inner provider, kept as long as the model: a checkpointed block's
// recomputation (checkpoint.h) calls it in backward, after stage_forward returned.
class StageProviders {
 public:
  ParamProvider& get(ParamProvider& inner, const std::vector<int>& local) {
    auto& sp = by_inner_[&inner];
    if (!sp) sp = std::make_unique<StageProvider>(inner, local);
    return *sp;
  }

 private:
  std::map<ParamProvider*, std::unique_ptr<StageProvider>> by_inner_;
};

}  // namespace sb::models
