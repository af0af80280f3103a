// Inference quantization as a conversion of a model's weights: a quantizer turns fp32
// unit parameters into a ParamProvider that serves them (and runs the linear layers) in
// its own format. Chosen by name: none, int8-weight, int8-weight-channel, int8-dynamic,
// int8-static (with a Calibration), fp16, bf16. The model code has no special cases for any of them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/models/model.h"

namespace sb::quant {

class QuantizedWeights : public models::ParamProvider {
 public:
  // Bytes the model's weights occupy in this format (scales included).
  virtual std::int64_t model_bytes() const = 0;
  // Bytes held in memory, when the kernel library keeps more than the format needs
  // (int8-dynamic: oneDNN keeps the unpacked int8 copy beside the packed one).
  virtual std::int64_t resident_bytes() const { return model_bytes(); }
  // Linear weights a calibrated format kept in the compute dtype (skipped by measured error,
  // or not run in calibration); 0 for the other formats.
  virtual int unquantized_matrices() const { return 0; }
};

struct Calibration;  // calibration.h

// weights[u][i]: unit u's i-th parameter (fp32, spec shape), e.g. from a checkpoint or trainer.
// `compute`: the dtype the forward runs in (kFloat, or the format's low dtype: see
// compute_dtype): acquire() hands out 1-D parameters and embedding tables in it, and linear()
// takes and returns activations in it, so every op of the model (matmuls, attention, layer
// norm) runs in that dtype, as eager PyTorch's model.to(torch.bfloat16) does.
std::unique_ptr<QuantizedWeights> quantize(const std::string& name, const models::Model& model,
                                           const std::vector<std::vector<torch::Tensor>>& weights,
                                           torch::ScalarType compute = torch::kFloat,
                                           const Calibration* cal = nullptr);
// Whether `name` needs a Calibration (its record: int8-static does), so callers ask the
// format, never its name.
bool needs_calibration(const std::string& name);

// The dtype `name`'s forward computes in on device d, by `choice` (key quant_compute):
// "fp32"; the format's low dtype ("bf16" for bf16 and int8-weight*, "fp16" for fp16); or
// "auto": the low dtype where d has fast units for it (models::missing_fast_units), else
// fp32. `why` (optional) receives the reason, for the result.
torch::ScalarType compute_dtype(const std::string& name, const std::string& choice,
                                const torch::Device& d, std::string* why = nullptr);
// "" when `choice` is allowed for format `name`, else the error sentence (plan-time check).
std::string check_compute_choice(const std::string& name, const std::string& choice);

// LibTorch's int8 engine for int8-dynamic (process-global, so chosen once, before the first
// int8-dynamic matrix is packed): `choice` is an engine's name (x86, fbgemm, onednn, qnnpack)
// or "auto", the fastest of those this LibTorch has, measured here (key int8_engine).
struct Int8EngineChoice {
  std::string engine;  // the engine used
  std::string why;     // how it was chosen (the timings, under auto)
};
// The int8 matrix path of a CPU with these ISA flags (MachineInfo::isa, `lscpu`'s names): what
// int8-dynamic's GEMMs run on, and whether activations keep their 8 bits. With a u8 x s8
// instruction that accumulates in 32 bits (AMX-int8, AVX512-VNNI, AVX-VNNI) they do; AVX2's
// vpmaddubsw adds pairs of products in int16, which saturates for 8-bit activations, so there
// they are quantized to 7 bits (reduce_range, as PyTorch's x86 default does): on an AVX2-only
// AMD EPYC, gpt2-tiny's logits were 0.096 rel. L2 from fp32 with 8-bit activations and 0.022
// with 7-bit ones (tests/unit/quant_models.cpp).
struct Int8Units {
  std::string path;         // amx_int8, avx512_vnni, avx_vnni, avx2 or none
  bool full_range = false;  // 8-bit activations (else 7)
  std::string note;         // one sentence for the result and the benchmarks
};
Int8Units int8_units(const std::vector<std::string>& isa);
// This machine's (read once).
const Int8Units& host_int8_units();

// A linear layer as one forward runs it: rows x in -> out, `count` times per forward.
struct LinearShape {
  std::int64_t rows = 0, in = 0, out = 0, count = 0;
};
// The linear layers of a model's units (2-D weights other than embedding tables, (out, in)),
// one entry per distinct shape with its count, at `rows` rows (a batch's tokens).
std::vector<LinearShape> linear_shapes(const std::vector<models::UnitSpec>& units, std::int64_t rows);
// "auto" times each engine on `shapes` (the model's own linears; empty: one BERT-base FFN
// layer at 128 rows) and keeps the one whose weighted sum, one forward's linears, is least.
Int8EngineChoice select_int8_engine(const std::string& choice,
                                    const std::vector<LinearShape>& shapes = {});
std::vector<std::string> quantizer_names();
// model_bytes() that quantize(name, ...) would report, from the shapes alone.
std::int64_t quantized_model_bytes(const std::string& name, const std::vector<models::UnitSpec>& units);

}  // namespace sb::quant
