// Compressor "none": fp32 on the wire (4 bytes per element), the uncompressed baseline.
#include "workloads/comm/compress_cast.h"

namespace sb::comm {
namespace {
const bool registered = (register_compressor("none", "fp32 on the wire, uncompressed (4 B/elem)",
                                             [](const CompressorConfig&) {
                                               return std::make_unique<CastCompressor>(
                                                   "none", torch::kFloat);
                                             }),
                         true);
}  // namespace
}  // namespace sb::comm
