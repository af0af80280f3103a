// Quantization "int8-weight": weight-only int8 with ONE scale per tensor, exactly the seed's
// quantize_weights: scale = 127 / max|W|, q = round(W * scale) as int8; W ~ q / scale,
// dequantized on the fly in linear() into the compute dtype (bf16 where the device has bf16
// units, else fp32): a memory saving, not a speed-up.
#include "harness/core/check.h"
#include "workloads/quant/quantized_matrix.h"

namespace sb::quant {
namespace {

class Int8TensorMatrix final : public QuantizedMatrix {
 public:
  explicit Int8TensorMatrix(const torch::Tensor& w) {  // w: (out, in)
    const float amax = w.abs().max().item<float>();
    scale_ = amax > 0 ? 127.0f / amax : 1.0f;  // all-zero matrix: codes 0, any scale
    q_ = w.mul(scale_).round_().clamp_(-127, 127).to(torch::kChar);  // (out, in) int8
  }
  torch::Tensor dequantize(torch::ScalarType dtype) const override {
    return q_.to(dtype).div_(scale_);
  }
  std::int64_t bytes() const override { return q_.numel() + 4; }

 private:
  torch::Tensor q_;
  float scale_ = 1;
};

const bool registered =
    (register_quantizer("int8-weight", "int8 weights, one scale 127/max|W| per tensor (the seed's)",
                        [](const torch::Tensor& w) { return std::make_unique<Int8TensorMatrix>(w); },
                        [](std::int64_t r, std::int64_t c) { return r * c + 4; }, torch::kBFloat16),
     true);
}  // namespace
}  // namespace sb::quant
