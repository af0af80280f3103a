// The per-format piece of a quantizer: how one weight matrix (out, in) is stored and how a
// linear layer runs on it. quantized_weights.cpp turns a model's weights into a
// ParamProvider from one of these per matrix; quant_<name>.cpp registers one format each.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <torch/types.h>

namespace sb::quant {

class QuantizedMatrix {
 public:
  virtual ~QuantizedMatrix() = default;
  // (out, in) in `dtype`: what the matrix stands for (embedding lookups use it; the
  // weight-only formats dequantize into the forward's compute dtype).
  virtual torch::Tensor dequantize(torch::ScalarType dtype = torch::kFloat) const = 0;
  // x: (..., in) in the forward's compute dtype, b: (out) in the same dtype or undefined ->
  // (..., out) = x W^T + b in x's dtype. Default: dequantize into x's dtype on the fly, then
  // at::linear in that dtype (bf16 on AMX / tensor cores, fp32 elsewhere).
  virtual torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& b) const;
  // GELU(linear(x, b)) (approximate: "none" or "tanh"). Default: at::gelu of linear().
  virtual torch::Tensor linear_gelu(const torch::Tensor& x, const torch::Tensor& b,
                                    c10::string_view approximate) const {
    return at::gelu(linear(x, b), approximate);
  }
  // Bytes of the format: codes and scales (what would be stored or sent).
  virtual std::int64_t bytes() const = 0;
  // Bytes actually held in memory, when the kernel library keeps more than the format
  // (oneDNN's packed int8 weights keep the unpacked int8 copy too). Default: bytes().
  virtual std::int64_t resident_bytes() const { return bytes(); }
};

// w: (out, in) fp32 contiguous -> its quantized form.
using MatrixQuantizer = std::function<std::unique_ptr<QuantizedMatrix>(const torch::Tensor& w)>;
// bytes() of a (rows, cols) matrix in the format, without building it (for `shardbench plan`).
using MatrixBytes = std::function<std::int64_t(std::int64_t rows, std::int64_t cols)>;
// Registers `name` in the harness name set "quantization" too. A null quantizer ("none")
// keeps every matrix fp32. `low`: the low-precision dtype the format's forward may compute
// in besides fp32 (bf16 for bf16 and the weight-only int8 formats, fp16 for fp16); kFloat
// when it computes in fp32 only (none, int8-dynamic: its int8 GEMM takes fp32 activations).
void register_quantizer(const std::string& name, const std::string& doc, MatrixQuantizer q,
                        MatrixBytes bytes, torch::ScalarType low = torch::kFloat);

struct ActivationQuant;  // calibration.h
// A format that needs calibrated activation ranges (int8-static): w and its linear layer's
// input quantization (null for an embedding table no linear layer reads). quantize() then
// needs a Calibration, and the format's record says so (needs_calibration).
using CalibratedQuantizer =
    std::function<std::unique_ptr<QuantizedMatrix>(const torch::Tensor& w, const ActivationQuant* input)>;
void register_calibrated_quantizer(const std::string& name, const std::string& doc, CalibratedQuantizer q,
                                   MatrixBytes bytes, torch::ScalarType low);

}  // namespace sb::quant
