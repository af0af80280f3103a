// A provider of plain weights (PersistentParams) that counts what activation checkpointing asks
// of it (models/checkpoint.h): acquires outside and inside a recompute scope (the FSDP engine
// keeps the latter out of its learned order and pinning) and the gradient parts a chunked
// block announces (ParamProvider::begin_partial_grads).
#pragma once
#include <utility>
#include <vector>

#include <torch/types.h>

#include "workloads/models/model.h"
#include "workloads/models/params.h"

namespace sbtest {

class CountingParams final : public sb::models::ParamProvider {
 public:
  explicit CountingParams(sb::models::UnitTensors v) : inner_(std::move(v), true) {}
  std::vector<torch::Tensor> acquire(int u) override {
    ++(depth_ > 0 ? scoped_acquires : plain_acquires);
    return inner_.acquire(u);
  }
  void release(int, const torch::Tensor&) override {}
  torch::Tensor linear_cross_entropy(int u, int i, const torch::Tensor& x, const torch::Tensor& w,
                                     const torch::Tensor& t) override {
    return inner_.linear_cross_entropy(u, i, x, w, t);
  }
  void begin_recompute() override { ++depth_; }
  void end_recompute() override { --depth_; }
  void begin_partial_grads() override { ++partial_parts; }
  sb::models::PersistentParams& inner() { return inner_; }
  int plain_acquires = 0, scoped_acquires = 0, partial_parts = 0;

 private:
  sb::models::PersistentParams inner_;
  int depth_ = 0;
};

}  // namespace sbtest
