// Quantization "none": fp32 weights, the baseline every other format is compared with.
#include "workloads/quant/quantized_matrix.h"

namespace sb::quant {
namespace {
const bool registered = (register_quantizer("none", "fp32 weights (the baseline)", nullptr,
                                                     [](std::int64_t r, std::int64_t c) { return 4 * r * c; }), true);
}  // namespace
}  // namespace sb::quant
