// Plain persistent parameters (the reference trainer's and inference's ParamProvider) and
// the seeded initialisation every engine shares, so that the FSDP engine can start its
// flat shards from exactly the values the reference starts from.
#pragma once
#include <cstdint>
#include <vector>

#include "workloads/models/model.h"

namespace sb::models {

using UnitTensors = std::vector<std::vector<torch::Tensor>>;  // [unit][param], spec shapes

// One parameter's initial value (fp32, CPU): normal(0, spec.std) / zeros / ones drawn from
// a generator seeded by (seed, unit, index) alone, so any subset can be initialised
// independently and in any order with the same result. A parameter split over tp
// (ParamSpec::tp) is this rank's block of the whole one's value.
torch::Tensor init_param(const ParamSpec& spec, std::uint64_t seed, int unit, int index);
std::vector<torch::Tensor> init_unit(const std::vector<UnitSpec>& units, int unit,
                                     std::uint64_t seed);
UnitTensors init_params(const std::vector<UnitSpec>& units, std::uint64_t seed);

// Leaf tensors with requires_grad; acquire returns them as they are.
class PersistentParams final : public ParamProvider {
 public:
  // Takes the values (fp32 or fp64, any device) and makes them leaves requiring grad.
  explicit PersistentParams(UnitTensors values, bool requires_grad = true);
  std::vector<torch::Tensor> acquire(int unit) override;
  void release(int unit, const torch::Tensor& out) override {}
  torch::Tensor linear_cross_entropy(int unit, int w_index, const torch::Tensor& x, const torch::Tensor& w,
                                     const torch::Tensor& targets) override;

  UnitTensors& tensors() { return params_; }
  const UnitTensors& tensors() const { return params_; }
  void zero_grad();  // sets every .grad() to undefined

 private:
  UnitTensors params_;
};

}  // namespace sb::models
