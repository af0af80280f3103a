// Error feedback: what a lossy compressor did not send is kept per buffer (and per rank) and
// added to that buffer's next input, so nothing is lost over steps, only delayed:
//   e = x + residual[key];  wire = C(e);  residual[key] = e - D(wire).
// Invariant (tested): sum over steps of D(wire) + residual == sum over steps of x.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <torch/types.h>

#include "workloads/comm/compressor.h"

namespace sb::comm {

class ErrorFeedback {
 public:
  // x: (n) fp32 -> wire for C(x + residual[key]); updates residual[key].
  torch::Tensor compress(Compressor& c, const std::string& key, const torch::Tensor& x);

  // The two halves, for callers that compress e in pieces (reduce-scatter chunks):
  // corrected(): e = x + residual[key] (a new tensor; residual starts at zero, and a buffer
  // whose size changed is an error naming the key).
  torch::Tensor corrected(const std::string& key, const torch::Tensor& x) const;
  // keep(): residual[key] = e - sent, sent = what the receivers decode, both (n) fp32.
  void keep(const std::string& key, const torch::Tensor& e, const torch::Tensor& sent);

  // (n) fp32, or an undefined tensor before the key's first step.
  torch::Tensor residual(const std::string& key) const;
  std::int64_t residual_bytes() const;  // memory the residuals hold (model-state accounting)
  void clear() { residual_.clear(); }
  // Checkpoints: every residual as out[prefix + key]; load_state replaces all residuals with
  // the entries of `in` under `prefix` (a resumed run then re-sends exactly what the
  // uninterrupted one would have).
  void save_state(StateDict& out, const std::string& prefix) const;
  void load_state(const StateDict& in, const std::string& prefix);

 private:
  std::map<std::string, torch::Tensor> residual_;
};

}  // namespace sb::comm
