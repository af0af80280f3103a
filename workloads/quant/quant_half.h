// fp16 / bf16 weights: stored in 2 bytes, cast to fp32 on the fly inside linear() (CPU
// LibTorch has no fast fp16 GEMM, and fp32 activations keep the accuracy loss to the weights).
#pragma once
#include "workloads/quant/quantized_matrix.h"

namespace sb::quant {

class HalfMatrix final : public QuantizedMatrix {
 public:
  HalfMatrix(const torch::Tensor& w, torch::ScalarType dtype) : w_(w.to(dtype)) {}  // (out, in)
  torch::Tensor dequantize() const override { return w_.to(torch::kFloat); }
  std::int64_t bytes() const override { return 2 * w_.numel(); }

 private:
  torch::Tensor w_;
};

}  // namespace sb::quant
