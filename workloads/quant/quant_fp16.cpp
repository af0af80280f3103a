// Quantization "fp16": IEEE half weights (2 B/param); the forward computes in fp16 where the device
// has fast fp16 units (quant_compute = "auto"), else in fp32.
#include "workloads/quant/quant_half.h"

namespace sb::quant {
namespace {
const bool registered =
    (register_quantizer("fp16", "IEEE half weights; fp16 compute where the device has fp16 units, else fp32",
                        [](const torch::Tensor& w) { return std::make_unique<HalfMatrix>(w, torch::kHalf); },
                        [](std::int64_t r, std::int64_t c) { return 2 * r * c; }, torch::kHalf),
     true);
}  // namespace
}  // namespace sb::quant
