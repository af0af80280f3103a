// Compressor "none": fp32 on the wire (4 bytes per element), the uncompressed baseline.
#include "workloads/comm/compress_cast.h"

namespace sb::comm {
namespace {
const sb::Registrar registrar([] {
  CompressorInfo info;
  info.identity = true;  // a collective with it is the uncompressed one
  info.make = [](const CompressorConfig&) {
    return std::make_unique<CastCompressor>("none", torch::kFloat);
  };
  register_compressor("none", "fp32 on the wire, uncompressed (4 B/elem)", std::move(info));
});
}  // namespace
}  // namespace sb::comm
