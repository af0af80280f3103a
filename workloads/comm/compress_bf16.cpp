// Compressor "bf16": bfloat16 on the wire (2 B/elem): fp32's range with 8 bits of mantissa,
// the mild parameter compression of the hybrid policy.
#include "workloads/comm/compress_cast.h"

namespace sb::comm {
namespace {
const bool registered = (register_compressor("bf16", "bfloat16 on the wire (2 B/elem)",
                                             [](const CompressorConfig&) {
                                               return std::make_unique<CastCompressor>(
                                                   "bf16", torch::kBFloat16);
                                             }),
                         true);
}  // namespace
}  // namespace sb::comm
