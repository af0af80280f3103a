// The infer task's keys and the served model's (infer and serve), typed (harness/spec/
// config.h): InferKeys are declared in infer_workload.cpp, WeightsKeys in served_model.cpp,
// each with its cross-key rules.
#pragma once
#include <cstdint>
#include <string>

namespace sb {
template <class S> class Fields;
}

namespace sb::infer {

// Task infer: the LoadGen scenario and the accuracy check.
struct InferKeys {
  std::string scenario;  // single-stream, multi-stream, server, offline
  std::int64_t queries = 0, samples_per_query = 0;
  double target_qps = 0, server_latency_ms = 0;
  std::int64_t accuracy_batches = 0;
  static void declare(Fields<InferKeys>& f);
};

// Tasks infer, serve: the weights served and how a quantized model computes.
struct WeightsKeys {
  std::string checkpoint;     // "" = the model folder's weights or seeded
  std::string quant_compute;  // auto, fp32, bf16, fp16
  std::string int8_engine;    // auto, x86, fbgemm, onednn, qnnpack
  // int8-static's calibration (workloads/quant/calibration.h)
  std::string calibration;    // the observer: minmax, percentile, entropy
  std::int64_t calibration_batches = 0;
  double calibration_percentile = 0;
  double int8_skip_error = 0;
  static void declare(Fields<WeightsKeys>& f);
};

}  // namespace sb::infer
