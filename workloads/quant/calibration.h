// Calibration for static int8 (quantization = "int8-static"): the fp32 model runs over
// held-out batches while an observer (observer.h; key `calibration`) watches the input of
// every linear layer; each layer's range becomes a fixed uint8 scale and zero point. A second
// pass measures each layer's error under int8 (its output from fake-quantized input and
// weights against its fp32 output, on the same fp32 inputs) and keeps the layers above
// `int8_skip_error` in the compute dtype: BERT's usual failure under static int8 is a few
// layers whose inputs have outliers.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/quant/observer.h"

namespace sb::quant {

// Symmetric int8 weights, one step per output channel: step[o] = max|W[o,:]| / 127,
// codes = round(W / step) in [-127, 127] (an all-zero row gets a tiny step).
struct ChannelCodes {
  torch::Tensor codes;  // (out, in) int8
  torch::Tensor step;   // (out) fp32
  static ChannelCodes of(const torch::Tensor& w);
  torch::Tensor dequantize() const { return codes.to(torch::kFloat).mul_(step.unsqueeze(1)); }
};

// Affine uint8 activations: code = clamp(round(x / step) + zero_point, 0, qmax), x' =
// (code - zero_point) * step. The range is widened to hold 0 (so padding and ReLU zeros are
// exact); step = (hi - lo) / qmax. qmax = 255, or 127 where the CPU's int8 path needs 7-bit
// activations (Int8Units::full_range).
struct ActivationQuant {
  double step = 1;
  std::int64_t zero_point = 0, qmax = 255;
  static ActivationQuant of(const ActivationRange& r, std::int64_t qmax);
  torch::Tensor codes(const torch::Tensor& x) const;  // uint8, x's shape
  torch::Tensor fake(const torch::Tensor& x) const;   // dequantized codes, fp32
};

struct LayerCalibration {
  std::string name;       // the weight's, e.g. h.0.mlp.c_proj.weight
  ActivationRange range;  // the observer's
  ActivationQuant input;
  double error = 0;       // ||y_int8 - y|| / ||y|| over the calibration batches
  bool skip = false;      // error > skip_error: kept in the compute dtype
};

struct CalibrationOptions {
  std::string observer = "minmax";
  ObserverOptions observer_options;
  double skip_error = 1.0;  // relative error above which a layer stays unquantized
};

struct Calibration {
  CalibrationOptions options;
  std::int64_t batches = 0;
  std::map<std::pair<int, int>, LayerCalibration> layers;  // (unit, weight index)
  double seconds = 0;
  const LayerCalibration* find(int unit, int index) const;
  std::vector<std::string> skipped() const;
};

// Runs `model` with fp32 `weights` over `batches` (classify() when a batch has labels, else
// logits(): the forward the point serves), observer.passes() times, then once more for the
// errors. Deterministic: the same weights and batches give the same result.
Calibration calibrate(models::Model& model, const models::UnitTensors& weights,
                      const std::vector<models::Batch>& batches, const CalibrationOptions& o);

}  // namespace sb::quant
