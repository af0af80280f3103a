// Quantization "fp16": IEEE half weights (2 B/param), fp32 compute.
#include "workloads/quant/quant_half.h"

namespace sb::quant {
namespace {
const bool registered = (register_quantizer("fp16", "IEEE half weights, fp32 compute",
                                            [](const torch::Tensor& w) {
                                              return std::make_unique<HalfMatrix>(w, torch::kHalf);
                                            },
                        [](std::int64_t r, std::int64_t c) { return 2 * r * c; }),
                         true);
}  // namespace
}  // namespace sb::quant
