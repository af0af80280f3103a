// Quantization "bf16": bfloat16 weights (2 B/param); the forward computes in bf16 where the device
// has fast bf16 units (quant_compute = "auto"), else in fp32.
#include "workloads/quant/quant_half.h"

namespace sb::quant {
namespace {
const bool registered =
    (register_quantizer("bf16", "bfloat16 weights; bf16 compute where the device has bf16 units, else fp32",
                        [](const torch::Tensor& w) { return std::make_unique<HalfMatrix>(w, torch::kBFloat16); },
                        [](std::int64_t r, std::int64_t c) { return 2 * r * c; }, torch::kBFloat16),
     true);
}  // namespace
}  // namespace sb::quant
