// Seeded initialisation and the PersistentParams provider.
#include "workloads/models/params.h"

#include "workloads/models/loss.h"

#include <ATen/CPUGeneratorImpl.h>

#include "harness/core/check.h"

namespace sb::models {
namespace {

// splitmix64: decorrelates nearby (seed, unit, index) triples into generator seeds.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

torch::Tensor init_param(const ParamSpec& spec, std::uint64_t seed, int unit, int index) {
  if (spec.ep_size > 1) {  // the whole stack of experts' values, then this rank's
    ParamSpec whole = spec;
    whole.shape[0] *= spec.ep_size;
    whole.ep_size = 1, whole.ep_rank = 0;
    return ep_slice(spec, init_param(whole, seed, unit, index));
  }
  if (spec.tp != TpSplit::None) {  // the whole parameter's values, then this rank's block
    ParamSpec whole = spec;
    whole.tp = TpSplit::None;
    whole.shape = spec.full_shape;
    return tp_slice(spec, init_param(whole, seed, unit, index));
  }
  auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  switch (spec.init) {
    case ParamSpec::Init::Zeros: return torch::zeros(spec.shape, opts);
    case ParamSpec::Init::Ones: return torch::ones(spec.shape, opts);
    case ParamSpec::Init::Normal: break;
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(
      mix(mix(mix(seed) ^ static_cast<std::uint64_t>(unit)) ^ static_cast<std::uint64_t>(index)));
  // The CPU normal kernel fills serially from the generator: same values for any thread count.
  return at::normal(0.0, spec.std, spec.shape, gen, opts);
}

std::vector<torch::Tensor> init_unit(const std::vector<UnitSpec>& units, int unit,
                                     std::uint64_t seed) {
  SB_CHECK(unit >= 0 && unit < static_cast<int>(units.size()),
           "unit {} out of range: the model has {} units", unit, units.size());
  std::vector<torch::Tensor> out;
  const auto& ps = units[unit].params;
  // A pipeline stage's unit takes the values of its place in the whole model (pipeline.h).
  const int whole = units[unit].whole(unit);
  for (int i = 0; i < static_cast<int>(ps.size()); ++i) out.push_back(init_param(ps[i], seed, whole, i));
  return out;
}

UnitTensors init_params(const std::vector<UnitSpec>& units, std::uint64_t seed) {
  UnitTensors out;
  for (int u = 0; u < static_cast<int>(units.size()); ++u) out.push_back(init_unit(units, u, seed));
  return out;
}

PersistentParams::PersistentParams(UnitTensors values, bool requires_grad)
    : params_(std::move(values)) {
  for (auto& unit : params_)
    for (auto& t : unit) t = t.detach().requires_grad_(requires_grad);
}

std::vector<torch::Tensor> PersistentParams::acquire(int unit) {
  SB_CHECK(unit >= 0 && unit < static_cast<int>(params_.size()),
           "unit {} out of range: the provider holds {} units", unit, params_.size());
  return params_[unit];
}

torch::Tensor PersistentParams::linear_cross_entropy(int, int, const torch::Tensor& x, const torch::Tensor& w,
                                                    const torch::Tensor& targets) {
  return models::linear_cross_entropy(x, w, targets);  // plain weights: the chunked form
}

void PersistentParams::zero_grad() {
  for (auto& unit : params_)
    for (auto& t : unit) t.mutable_grad() = torch::Tensor();
}

}  // namespace sb::models
