// oneDNN's prepacked linear weights (onednn_packed.h). The two ops are registered by
// LibTorch's dispatcher (namespace mkldnn) without C++ headers: called boxed, by schema.
#include "workloads/quant/onednn_packed.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "harness/core/check.h"

namespace sb::quant {
namespace {

std::optional<c10::OperatorHandle> op(const char* name) {
  return c10::Dispatcher::singleton().findSchema({name, ""});
}

}  // namespace

bool onednn_packing_available() {
  static const bool ok = at::globalContext().userEnabledMkldnn() &&
                         op("mkldnn::_reorder_linear_weight").has_value() &&
                         op("mkldnn::_linear_pointwise").has_value();
  return ok;
}

torch::Tensor onednn_pack(const torch::Tensor& w) {
  static const auto reorder = op("mkldnn::_reorder_linear_weight");
  SB_CHECK(reorder, "this LibTorch has no mkldnn::_reorder_linear_weight");
  torch::jit::Stack s{w.contiguous(), c10::IValue()};  // batch_size: none (good for 1 to 1024 rows)
  reorder->callBoxed(&s);
  return s.at(0).toTensor();
}

torch::Tensor onednn_linear(const torch::Tensor& x, const torch::Tensor& packed, const torch::Tensor& b) {
  static const auto linear = op("mkldnn::_linear_pointwise");
  SB_CHECK(linear, "this LibTorch has no mkldnn::_linear_pointwise");
  // (X, W, B?, attr, scalars: Scalar?[], algorithm: str?); attr "none": no fused activation.
  c10::impl::GenericList scalars(c10::OptionalType::create(c10::NumberType::get()));
  torch::jit::Stack s{x.contiguous(), packed, b.defined() ? c10::IValue(b) : c10::IValue(),
                      std::string("none"), scalars, c10::IValue()};
  linear->callBoxed(&s);
  return s.at(0).toTensor();
}

}  // namespace sb::quant
