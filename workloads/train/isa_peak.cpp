// The ISA's theoretical peak (isa_peak.h): a table of FLOP per cycle per core by the units a
// CPU's flags name, times cores and clock.
#include "workloads/train/isa_peak.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace sb::train {
namespace {

bool has(const sb::MachineInfo& m, const char* flag) {
  return std::find(m.isa.begin(), m.isa.end(), flag) != m.isa.end();
}

// AMD cores before Zen 5 (family 26) execute a 512-bit operation as two 256-bit halves.
bool half_width_512(const sb::MachineInfo& m) { return m.vendor == "AuthenticAMD" && m.cpu_family < 26; }

IsaPeak rule(double flops, std::string units) {
  IsaPeak p;
  p.flops_per_cycle = flops;
  p.units = std::move(units);
  return p;
}

}  // namespace

IsaPeak isa_flops_per_cycle(const sb::MachineInfo& m, torch::ScalarType dtype) {
  const bool x86 = has(m, "sse4_2") || m.vendor == "GenuineIntel" || m.vendor == "AuthenticAMD";
  if (!x86) return rule(0, "no FLOP-per-cycle rule for this CPU's ISA (x86 only)");
  const bool half = half_width_512(m);
  if (dtype == torch::kFloat) {
    // An FMA is 2 FLOPs; two FMA units of the widest vector width.
    if (has(m, "avx512f")) return rule(half ? 32 : 64, half ? "AVX-512 FMA (2 x 256-bit datapaths)" : "AVX-512 FMA (2 x 16 fp32 lanes)");
    if (has(m, "avx2") && has(m, "fma")) return rule(32, "AVX2 FMA (2 x 8 fp32 lanes)");
    if (has(m, "avx")) return rule(16, "AVX (8-lane add + 8-lane multiply)");
    return rule(8, "SSE (4-lane add + 4-lane multiply)");
  }
  if (dtype == torch::kBFloat16) {
    // TDPBF16PS: a (16 x 32) by (32 x 16) bf16 tile product, 16,384 FLOPs, one per 16 cycles.
    if (has(m, "amx_bf16")) return rule(1024, "AMX-BF16 tiles");
    // VDPBF16PS: 16 fp32 lanes x 2 bf16 products x 2 FLOPs, on two units.
    if (has(m, "avx512_bf16")) return rule(half ? 64 : 128, half ? "AVX512-BF16 (2 x 256-bit datapaths)" : "AVX512-BF16 (2 units)");
    return rule(0, "no bf16 units (none of avx512_bf16, amx_bf16)");
  }
  if (dtype == torch::kHalf) {
    if (has(m, "amx_fp16")) return rule(1024, "AMX-FP16 tiles");
    return rule(0, "no fp16 matrix units (amx_fp16)");
  }
  return rule(0, fmt::format("no FLOP-per-cycle rule for dtype {}", c10::toString(dtype)));
}

IsaPeak isa_peak(const sb::MachineInfo& m, torch::ScalarType dtype, double cores) {
  IsaPeak p = isa_flops_per_cycle(m, dtype);
  p.gflops = std::numeric_limits<double>::quiet_NaN();
  if (p.flops_per_cycle <= 0) {
    p.unknown = p.units;
  } else if (!(m.max_clock_ghz > 0)) {
    p.unknown = fmt::format("the clock of CPU '{}' is unknown (no cpufreq in /sys and no GHz in its "
                            "model name, as in most virtual machines)", m.cpu_model);
  } else {
    p.gflops = cores * m.max_clock_ghz * p.flops_per_cycle;
    p.basis = fmt::format("{:g} cores x {:.2f} GHz ({}) x {:g} FLOP/cycle ({})", cores, m.max_clock_ghz,
                          m.clock_source, p.flops_per_cycle, p.units);
  }
  return p;
}

}  // namespace sb::train
