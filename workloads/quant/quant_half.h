// fp16 / bf16 weights, stored in 2 bytes. The forward computes in that dtype where the device
// has fast units for it (key quant_compute, quantizer.h); elsewhere (an AVX2 CPU, where
// LibTorch's bf16 GEMM is ~100x slower than fp32) linear() casts them to fp32 on the fly.
// bf16 on a CPU with bf16 units also keeps oneDNN's prepacked copy (onednn_packed.h), which
// bf16 linears run on: resident bytes are then twice the format's (the plain copy stays for
// embedding lookups and the fp32 fallback).
#pragma once
#include "workloads/models/device.h"
#include "workloads/quant/onednn_packed.h"
#include "workloads/quant/quantized_matrix.h"

namespace sb::quant {

class HalfMatrix final : public QuantizedMatrix {
 public:
  HalfMatrix(const torch::Tensor& w, torch::ScalarType dtype) : w_(w.to(dtype)) {  // (out, in)
    if (dtype == torch::kBFloat16 && w_.is_cpu() && onednn_packing_available() &&
        models::missing_fast_units(w_.device(), dtype).empty())
      packed_ = onednn_pack(w_);
  }
  torch::Tensor dequantize(torch::ScalarType dtype) const override { return w_.to(dtype); }
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& b) const override {
    if (packed_.defined() && x.scalar_type() == torch::kBFloat16 && x.is_cpu())
      return onednn_linear(x, packed_, b.defined() ? b.to(torch::kBFloat16) : b);
    return QuantizedMatrix::linear(x, b);
  }
  std::int64_t bytes() const override { return 2 * w_.numel(); }
  std::int64_t resident_bytes() const override { return packed_.defined() ? 2 * bytes() : bytes(); }

 private:
  torch::Tensor w_, packed_;
};

}  // namespace sb::quant
