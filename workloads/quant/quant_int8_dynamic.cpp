// Quantization "int8-dynamic": int8 weights (symmetric, one scale per output channel),
// activations quantized per batch at run time (uint8, scale and zero point from the batch's
// range), int8 GEMM with int32 accumulation by LibTorch's quantized engine: what PyTorch's
// quantize_dynamic does to nn.Linear. The engine is oneDNN where LibTorch has it (the
// Debian LibTorch 1.13 had no FBGEMM, and oneDNN was the faster of the others), else QNNPACK.
#include <ATen/native/quantized/PackedParams.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <string>

#include "harness/core/check.h"
#include "workloads/quant/quantized_matrix.h"

namespace sb::quant {
namespace {

// The quantized engine is process-global; pick it once (oneDNN, else QNNPACK).
void ensure_engine() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto& engines = at::globalContext().supportedQEngines();
    auto has = [&](at::QEngine e) { return std::find(engines.begin(), engines.end(), e) != engines.end(); };
    if (has(at::QEngine::ONEDNN)) at::globalContext().setQEngine(at::QEngine::ONEDNN);
    else if (has(at::QEngine::QNNPACK)) at::globalContext().setQEngine(at::QEngine::QNNPACK);
    else SB_FAIL("int8-dynamic needs LibTorch's oneDNN or QNNPACK quantized engine and this "
                 "build has neither; use int8-weight-channel instead");
  });
}

// Whether the CPU multiplies u8 x s8 with 32-bit accumulation in one instruction (AVX-512
// VNNI, AVX-VNNI, AMX). Without it, oneDNN's AVX2 kernel adds pairs of u8*s8 products in
// int16 (vpmaddubsw), which saturates for activations using the full 8 bits: on such a CPU
// (AMD EPYC, AVX2 only) gpt2-tiny's logits were 0.096 rel. L2 from fp32 with 8-bit activations
// and 0.022 with 7-bit ones (tests/unit/quant_models.cpp). Without VNNI activations are
// therefore quantized to 7 bits (reduce_range), as PyTorch's x86 default does.
bool cpu_has_vnni() {
  static const bool has = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("flags", 0) == 0)
        return line.find(" avx512_vnni") != std::string::npos ||
               line.find(" avx_vnni") != std::string::npos ||
               line.find(" amx_int8") != std::string::npos;
    return false;
  }();
  return has;
}

class Int8DynamicMatrix final : public QuantizedMatrix {
 public:
  explicit Int8DynamicMatrix(const torch::Tensor& w) : out_(w.size(0)), in_(w.size(1)) {  // (out, in)
    ensure_engine();
    // Symmetric per-channel steps max|W[o,:]| / 127 (zero point 0); an all-zero row gets a tiny step.
    auto step = w.abs().amax(1).div_(127.0).clamp_min_(1e-12).to(torch::kDouble);   // (out)
    auto qw = at::quantize_per_channel(w, step, torch::zeros({out_}, torch::kLong), 0, at::kQInt8);
    static auto prepack =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("quantized::linear_prepack", "")
            .typed<c10::intrusive_ptr<LinearPackedParamsBase>(at::Tensor, c10::optional<at::Tensor>)>();
    packed_ = prepack.call(qw, c10::nullopt);
  }
  torch::Tensor dequantize() const override {
    return std::get<0>(packed_->unpack()).dequantize();
  }
  // x: (..., in) -> (..., out); the bias is added in fp32 after the int8 GEMM.
  torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& b) const override {
    auto shape = x.sizes().vec();
    SB_CHECK(shape.back() == in_, "int8-dynamic linear: input has {} features, weight expects {}",
             shape.back(), in_);
    auto y = packed_->apply_dynamic(x.reshape({-1, in_}).contiguous(),
                                    /*reduce_range=*/!cpu_has_vnni());  // (M, out)
    if (b.defined()) y.add_(b);
    shape.back() = out_;
    return y.view(shape);
  }
  // Format: int8 codes + one fp32 step per channel. Resident: oneDNN keeps the unpacked int8
  // weight (for unpack()) beside its packed copy, and LibTorch stores steps as fp64 and zero
  // points as int64.
  std::int64_t bytes() const override { return out_ * in_ + 4 * out_; }
  std::int64_t resident_bytes() const override { return 2 * out_ * in_ + 16 * out_; }

 private:
  std::int64_t out_, in_;
  c10::intrusive_ptr<LinearPackedParamsBase> packed_;
};

const bool registered =
    (register_quantizer("int8-dynamic",
                        "int8 per-channel weights, activations quantized per batch, int8 GEMM (oneDNN)",
                        [](const torch::Tensor& w) { return std::make_unique<Int8DynamicMatrix>(w); },
                        [](std::int64_t r, std::int64_t c) { return r * c + 4 * r; }),
     true);
}  // namespace
}  // namespace sb::quant
