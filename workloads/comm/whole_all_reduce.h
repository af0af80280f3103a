// The whole all-reduce form of a compressor (CompressorForm::WholeAllReduce, e.g. PowerSGD):
// it is not a codec of each rank's buffer but runs the gradient all-reduce itself, as phases
// around exact plain collectives, and keeps state per buffer (a warm start, residuals).
// CompressedCollectives runs it for the gradient all-reduce when the policy names it.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/comm/composite.h"
#include "workloads/comm/compressor.h"

namespace sb::comm {

struct CollectiveStats;

class WholeAllReduce {
 public:
  virtual ~WholeAllReduce() = default;
  // The sum over `world` ranks of the (n) fp32 tensor input() gives when the first phase
  // starts, delivered as (n) fp32, identical on every rank, after the last. key names the
  // buffer (its state); adds its logical and wire bytes to *bytes.
  virtual std::vector<CompositePhase> all_reduce_phases(
      const std::string& key, std::function<torch::Tensor()> input, std::int64_t n, int world,
      std::function<void(const torch::Tensor&)> deliver, CollectiveStats* bytes) = 0;
  // Bytes of state this rank holds now (CompressorInfo::state_bytes predicts it).
  virtual std::int64_t state_bytes() const = 0;
  // Checkpoints: everything a later call depends on, under names prefix + "..."; load_state
  // replaces it all.
  virtual void save_state(StateDict& out, const std::string& prefix) const = 0;
  virtual void load_state(const StateDict& in, const std::string& prefix) = 0;
};

}  // namespace sb::comm
