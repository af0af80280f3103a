// Compressor "fp16": IEEE half on the wire (2 B/elem); values beyond 65504 become inf, so it
// suits parameters and normalised gradients, not raw loss-scaled sums.
#include "workloads/comm/compress_cast.h"

namespace sb::comm {
namespace {
const bool registered = (register_compressor("fp16", "IEEE half on the wire (2 B/elem)",
                                             [](const CompressorConfig&) {
                                               return std::make_unique<CastCompressor>(
                                                   "fp16", torch::kHalf);
                                             }),
                         true);
}  // namespace
}  // namespace sb::comm
