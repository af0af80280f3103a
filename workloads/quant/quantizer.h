// Inference quantization as a conversion of a model's weights: a quantizer turns fp32
// unit parameters into a ParamProvider that serves them (and runs the linear layers) in
// its own format. Chosen by name: none, int8-weight, int8-weight-channel, int8-dynamic,
// fp16, bf16. The model code has no special cases for any of them.
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
};

// weights[u][i]: unit u's i-th parameter (fp32, spec shape), e.g. from a checkpoint or trainer.
std::unique_ptr<QuantizedWeights> quantize(const std::string& name, const models::Model& model,
                                           const std::vector<std::vector<torch::Tensor>>& weights);
std::vector<std::string> quantizer_names();
// model_bytes() that quantize(name, ...) would report, from the shapes alone.
std::int64_t quantized_model_bytes(const std::string& name, const std::vector<models::UnitSpec>& units);

}  // namespace sb::quant
