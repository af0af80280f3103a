// The model an inference point serves (tasks infer and serve): built from the point's keys,
// the one place that reads model, checkpoint, pruning, quantization, quant_compute,
// int8_engine and device for them.
//   model, weights  the model as configured with fp32 host weights: the accuracy reference
//   served          what runs: the same model, or its pruned form (pruning; workloads/prune)
//   world > 1       sharded: a full_shard engine over the served weights, fp32
//   one rank        a quantizer's provider (or, for magnitude pruning without quantization,
//                   sparse weights) on `device`, computing in `compute`
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "workloads/comm/communicator.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/ep_inference.h"
#include "workloads/models/model.h"
#include "workloads/prune/pruner.h"
#include "workloads/prune/sparse_weights.h"
#include "workloads/quant/calibration.h"
#include "workloads/quant/quantizer.h"

namespace sb::infer {

struct ServedModel {
  std::unique_ptr<models::Model> model;  // as configured: the accuracy reference
  models::UnitTensors weights;           // its fp32 weights (cleared by callers that need none)
  std::unique_ptr<models::Model> served;
  std::unique_ptr<comm::Communicator> comm;
  std::unique_ptr<fsdp::Engine> engine;        // sharded (world > 1)
  std::unique_ptr<quant::QuantizedWeights> q;  // one rank
  torch::Device device = torch::kCPU;          // the `device` key (models/device.h)
  torch::ScalarType compute = torch::kFloat;   // the forward's dtype (key quant_compute)
  std::string compute_why = "sharded inference computes in fp32";
  quant::Int8EngineChoice int8_engine;  // int8-dynamic only
  std::optional<quant::Calibration> calibration;  // int8-static only
  prune::Pruned pruning;                // counts (its model and weights moved into served, q/engine)
  prune::SparseChoice sparse;           // magnitude pruning: the kernels chosen
  std::int64_t params_nonzero = 0;      // of the served model
  std::string checkpoint_note;          // what the checkpoint held that was not loaded
  // mesh.ep > 1 (models/ep_inference.h): the served model's experts split over the ep group,
  // inferred in this form, its experts placed by the moe.expert_placement file (if any).
  std::optional<models::EpForm> ep_form;
  std::string expert_placement;

  // f on the served weights (the engine's forward protocol when sharded).
  torch::Tensor run(const std::function<torch::Tensor(models::ParamProvider&)>& f) {
    return engine ? engine->forward_with(f) : f(*q);
  }
  // Bytes of the served weights on this rank (the engine's shard when sharded).
  double model_bytes() const;
  // model_bytes, params, pruning counts and kernels, host memory; the texts saying how it ran
  // (quantization, sharding, compute dtype and why, int8 engine, device, versions).
  void record(Recorder& rec, const Point& p, int rank) const;
};

// Per MoE layer, in order, over `forwards` forwards of every rank of `world` (collective;
// docs/METRICS.md "Expert-parallel inference"): the tokens routed to another rank's expert and
// the assignments over capacity as fractions, and per forward the all-to-all bytes (all
// ranks) and the slowest rank's all-to-all seconds; `count` names the scalar of forwards.
void record_ep_layers(Recorder& rec, MPI_Comm world, const std::vector<models::EpLayerStats>& sum,
                      std::int64_t forwards, const char* count);

// Builds everything; enters `inference` once the engine (whose buffers must be ordinary
// tensors) exists. rows: input rows per forward, for pruning.kernel = "auto"'s timing.
void build_served(ServedModel& s, RunContext& ctx, std::optional<c10::InferenceMode>& inference,
                  std::int64_t rows);

}  // namespace sb::infer
