// Floating-point dtypes by name (name set "dtype": fp32, bf16, fp16, and "auto" for the
// `dtype` key): the one place that maps between names and torch::ScalarType, for training,
// checkpoints, benchmarks and results.
#pragma once
#include <string>

#include <torch/types.h>

namespace sb::models {

// "fp32" | "bf16" | "fp16"; unknown: error listing them.
torch::ScalarType dtype_from_name(const std::string& name);
// The inverse ("fp32", ...); other dtypes by LibTorch's name.
std::string dtype_name(torch::ScalarType t);
// The `dtype` key of training: a dtype name, or "auto" = bf16 where the device has bf16
// matrix units (missing_fast_units), else fp32; `why` receives the reason.
torch::ScalarType resolve_dtype(const std::string& name, const torch::Device& device,
                                std::string* why = nullptr);

}  // namespace sb::models
