// Quantization "int8-static": int8 weights (symmetric, one step per output channel) and
// uint8 activations with a fixed step and zero point per layer, measured by calibration
// (calibration.h) instead of per batch, so a forward spends nothing finding ranges. The GEMM
// is oneDNN's qlinear_pointwise (PyTorch 2's x86 int8 path: VNNI or AMX-int8 where the CPU
// has them) with int32 accumulation and the output dequantized inside the kernel straight to
// the forward's compute dtype: with quant_compute = bf16 every other op (attention, layer
// norm, GELU) runs in bf16 and activations pass between layers in bf16, never in fp32.
// Layers calibration marked to skip, or never saw, keep their weights in the compute dtype.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include "harness/core/check.h"
#include "workloads/quant/calibration.h"
#include "workloads/quant/quantized_matrix.h"

namespace sb::quant {
namespace {

c10::OperatorHandle op(const char* name) {
  try {
    return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  } catch (const c10::Error&) {
    SB_FAIL("int8-static runs oneDNN's {} and this LibTorch has no such operator (built without "
            "oneDNN?); use quantization = \"int8-dynamic\"", name);
  }
}

class Int8StaticMatrix final : public QuantizedMatrix {
 public:
  Int8StaticMatrix(const torch::Tensor& w, const ActivationQuant* input)
      : out_(w.size(0)), in_(w.size(1)), w_(ChannelCodes::of(w)), zp_(torch::zeros({out_}, torch::kLong)) {
    if (input) {  // an embedding table never used as a linear layer has none
      x_ = *input;
      static const auto prepack = op("onednn::qlinear_prepack");
      torch::jit::Stack s{w_.codes, c10::IValue()};
      prepack.callBoxed(&s);
      packed_ = s.at(0).toTensor();
    }
  }
  torch::Tensor dequantize(torch::ScalarType dtype) const override { return w_.dequantize().to(dtype); }
  // x: (..., in) in the compute dtype -> (..., out) in the same dtype; bias added in the kernel.
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& b) const override {
    return run(x, b, "none", "");
  }
  // GELU as the kernel's post-op on the output, before it is written (one pass less).
  torch::Tensor linear_gelu(const torch::Tensor& x, const torch::Tensor& b,
                            c10::string_view approximate) const override {
    return run(x, b, "gelu", std::string(approximate));
  }
  // Format: int8 codes + one fp32 step per channel. Resident: oneDNN's packed copy beside the
  // codes (dequantize() reads those), and the int64 zero points the operator takes.
  std::int64_t bytes() const override { return out_ * in_ + 4 * out_; }
  std::int64_t resident_bytes() const override {
    return (packed_.defined() ? 2 : 1) * out_ * in_ + 4 * out_ + 8 * out_;
  }

 private:
  torch::Tensor run(const torch::Tensor& x, const torch::Tensor& b, const std::string& post,
                    const std::string& algorithm) const {
    SB_CHECK(packed_.defined(), "int8-static: a {} x {} matrix without a calibrated input range "
             "reached linear(); calibration must run the forward that is served", out_, in_);
    auto shape = x.sizes().vec();
    SB_CHECK(shape.back() == in_, "int8-static linear: input has {} features, weight expects {}",
             shape.back(), in_);
    static const auto qlinear = op("onednn::qlinear_pointwise");
    torch::jit::Stack s{x_.codes(x.reshape({-1, in_})), x_.step, x_.zero_point, packed_, w_.step, zp_,
                        b.defined() ? c10::IValue(b.to(torch::kFloat)) : c10::IValue(),
                        1.0, std::int64_t{0}, c10::IValue(x.scalar_type()), post,
                        c10::List<std::optional<at::Scalar>>(), algorithm};
    qlinear.callBoxed(&s);
    shape.back() = out_;
    return s.at(0).toTensor().view(shape);
  }

  std::int64_t out_, in_;
  ChannelCodes w_;
  torch::Tensor zp_;      // (out) zeros: symmetric weights
  ActivationQuant x_;
  torch::Tensor packed_;  // oneDNN's blocked layout of w_.codes
};

const bool registered =
    (register_calibrated_quantizer(
         "int8-static", "int8 per-channel weights, activations at calibrated fixed ranges, int8 GEMM "
                        "(oneDNN) into the compute dtype",
         [](const torch::Tensor& w, const ActivationQuant* input) {
           return std::make_unique<Int8StaticMatrix>(w, input);
         },
         [](std::int64_t r, std::int64_t c) { return r * c + 4 * r; }, torch::kBFloat16),
     true);
}  // namespace
}  // namespace sb::quant
