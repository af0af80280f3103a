// Floating-point dtypes by name (dtype.h) and their name set.
#include "workloads/models/dtype.h"

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/device.h"

namespace sb::models {

namespace {
sb::Registrar reg_dtypes([] {
  sb::register_name("dtype", "fp32", "32-bit float");
  sb::register_name("dtype", "bf16", "bfloat16 (8-bit exponent, 7-bit mantissa)");
  sb::register_name("dtype", "fp16", "IEEE half (5-bit exponent, 10-bit mantissa)");
  sb::register_name("dtype", "auto", "dtype only: bf16 where the device has bf16 matrix units "
                                     "(AMX or AVX-512 bf16, a GPU), else fp32");
});
}  // namespace

torch::ScalarType dtype_from_name(const std::string& name) {
  if (name == "fp32") return torch::kFloat32;
  if (name == "bf16") return torch::kBFloat16;
  if (name == "fp16") return torch::kFloat16;
  SB_FAIL("unknown dtype '{}'; known dtypes: fp32, bf16, fp16", name);
}

torch::ScalarType resolve_dtype(const std::string& name, const torch::Device& device,
                                std::string* why) {
  if (name != "auto") {
    if (why) *why = "dtype = \"" + name + "\"";
    return dtype_from_name(name);
  }
  // bf16, not fp16: it needs no loss scaling and every unit that speeds up fp16 matmuls
  // (a GPU's tensor cores, AMX-FP16) comes with bf16 units too.
  const std::string missing = missing_fast_units(device, torch::kBFloat16);
  if (why) *why = missing.empty() ? "auto: bf16, the device has bf16 units" : "auto: fp32, the " + missing;
  return missing.empty() ? torch::kBFloat16 : torch::kFloat32;
}

std::string dtype_name(torch::ScalarType t) {
  if (t == torch::kFloat32) return "fp32";
  if (t == torch::kBFloat16) return "bf16";
  if (t == torch::kFloat16) return "fp16";
  return c10::toString(t);
}

}  // namespace sb::models
