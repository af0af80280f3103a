// fp16 / bf16 weights, stored in 2 bytes. The forward computes in that dtype where the device
// has fast units for it (key quant_compute, quantizer.h); elsewhere (an AVX2 CPU, where
// LibTorch's bf16 GEMM is ~100x slower than fp32) linear() casts them to fp32 on the fly.
#pragma once
#include "workloads/quant/quantized_matrix.h"

namespace sb::quant {

class HalfMatrix final : public QuantizedMatrix {
 public:
  HalfMatrix(const torch::Tensor& w, torch::ScalarType dtype) : w_(w.to(dtype)) {}  // (out, in)
  torch::Tensor dequantize(torch::ScalarType dtype) const override { return w_.to(dtype); }
  std::int64_t bytes() const override { return 2 * w_.numel(); }

 private:
  torch::Tensor w_;
};

}  // namespace sb::quant
