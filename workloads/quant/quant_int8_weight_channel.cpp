// Quantization "int8-weight-channel": weight-only int8 with one scale per output channel
// (row): scale_o = 127 / max|W[o, :]|, q = round(W * scale_o); an outlier in one row no
// longer costs the other rows their resolution. Dequantized on the fly in linear(), into bf16
// where the device has bf16 units, else fp32.
#include "workloads/quant/quantized_matrix.h"

namespace sb::quant {
namespace {

class Int8ChannelMatrix final : public QuantizedMatrix {
 public:
  explicit Int8ChannelMatrix(const torch::Tensor& w) {  // w: (out, in)
    auto amax = w.abs().amax(1, /*keepdim=*/true);     // (out, 1)
    scale_ = torch::where(amax > 0, 127.0f / amax, torch::ones_like(amax));
    q_ = (w * scale_).round_().clamp_(-127, 127).to(torch::kChar);  // (out, in) int8
  }
  torch::Tensor dequantize(torch::ScalarType dtype) const override {
    return q_.to(dtype).div_(scale_.to(dtype));
  }
  std::int64_t bytes() const override { return q_.numel() + 4 * scale_.numel(); }

 private:
  torch::Tensor q_, scale_;  // (out, in) int8, (out, 1) fp32
};

const bool registered =
    (register_quantizer("int8-weight-channel", "int8 weights, one scale per output channel",
                        [](const torch::Tensor& w) { return std::make_unique<Int8ChannelMatrix>(w); },
                        [](std::int64_t r, std::int64_t c) { return r * c + 4 * r; }, torch::kBFloat16),
     true);
}  // namespace
}  // namespace sb::quant
