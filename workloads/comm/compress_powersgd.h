// PowerSGD (Vogels et al. 2019): rank-r approximation of the summed 2-D gradient, for
// all-reduce paths only (its two halves need a sum across ranks in between):
//   M_i = G_i + E_i (error feedback)            (rows, cols)
//   P = sum_i M_i Q ;  P <- orthonormal(P)      (rows, r)
//   Q = sum_i M_i^T P                            (cols, r)
//   result = P Q^T (identical on every rank);  E_i = M_i - P (M_i^T P)^T;  Q kept (warm start).
// A sum of rank-r matrices whose column spaces agree is reproduced exactly (up to rounding).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <utility>

#include <torch/types.h>

#include "workloads/comm/backend.h"
#include "workloads/comm/composite.h"
#include "workloads/comm/compressor.h"
#include "workloads/comm/whole_all_reduce.h"

namespace sb::comm {

struct CollectiveStats;
class Communicator;

// The whole all-reduce record of "powersgd" (setting rank) is registered in compress_powersgd.cpp.
class PowerSGD final : public WholeAllReduce {
 public:
  PowerSGD(std::int64_t rank, std::uint64_t seed, bool error_feedback = true);

  // m: (rows, cols) fp32, this rank's contribution -> (rows, cols) approximation of the sum
  // over the ranks of group g, identical on every rank (issued synchronously on comm).
  // Matrices with min(rows, cols) <= rank gain nothing and are all-reduced uncompressed. key
  // names the buffer (error feedback, Q).
  torch::Tensor all_reduce(const std::string& key, const torch::Tensor& m, Communicator& comm,
                           Group g, CollectiveStats* stats = nullptr);
  // x: (n) flat buffer, folded into a zero-padded (ceil(n / c), c) matrix, c = ceil(sqrt(n)).
  torch::Tensor all_reduce_flat(const std::string& key, const torch::Tensor& x,
                                Communicator& comm, Group g, CollectiveStats* stats = nullptr);
  // all_reduce_flat described for the communicator (composite.h): input() gives x ((n) fp32)
  // when the first phase starts, deliver gets the result after the last. Four phases: the
  // exact all-reduces of P and Q (a reduce-scatter and an all-gather each), the
  // orthogonalisation between them; two when the matrix is too small to compress. Adds its
  // bytes to *bytes.
  std::vector<CompositePhase> all_reduce_flat_phases(const std::string& key,
                                            std::function<torch::Tensor()> input, std::int64_t n,
                                            int world,
                                            std::function<void(const torch::Tensor&)> deliver,
                                            CollectiveStats* bytes);

  // WholeAllReduce: all_reduce_flat_phases.
  std::vector<CompositePhase> all_reduce_phases(const std::string& key,
                                                std::function<torch::Tensor()> input,
                                                std::int64_t n, int world,
                                                std::function<void(const torch::Tensor&)> deliver,
                                                CollectiveStats* bytes) override {
    return all_reduce_flat_phases(key, std::move(input), n, world, std::move(deliver), bytes);
  }

  std::int64_t rank() const { return rank_; }
  std::int64_t state_bytes() const override;  // residuals + warm-start Q
  // The (rows, cols) matrix all_reduce_flat folds n elements into.
  static std::pair<std::int64_t, std::int64_t> flat_shape(std::int64_t n);
  // What state_bytes() grows by once all_reduce_flat ran on a new key of n elements:
  // Q (cols x rank) + the residual (rows x cols) with error feedback, fp32; 0 when the
  // matrix is too small to compress.
  static std::int64_t flat_state_bytes(std::int64_t n, std::int64_t rank, bool error_feedback);
  // The bytes all_reduce_flat of n elements among `world` ranks puts on the wire from this
  // rank: the exact (fp32, reduce-scatter + all-gather) all-reduces of P (rows x rank) and Q
  // (cols x rank), or of the whole padded matrix when it is too small to compress.
  static std::int64_t flat_wire_bytes(std::int64_t n, std::int64_t rank, int world);
  // Checkpoints: Q as out[prefix + "q/" + key], residuals as out[prefix + "residual/" + key].
  // The initial Q of a key comes from (seed, key) alone, so Q itself is all the warm start
  // and random state there is; load_state replaces both maps.
  void save_state(StateDict& out, const std::string& prefix) const override;
  void load_state(const StateDict& in, const std::string& prefix) override;

 private:
  using Source = std::function<torch::Tensor()>;
  using Sink = std::function<void(const torch::Tensor&)>;
  // all_reduce of the (rows, cols) matrix input() gives.
  std::vector<CompositePhase> phases(const std::string& key, Source input, std::int64_t rows,
                            std::int64_t cols, int world, Sink deliver, CollectiveStats* bytes);
  // Deterministic fp32 all-reduce of the tensor of `shape` input() gives, bit-identical on
  // every rank (a library's all-reduce need not be): reduce-scatter + all-gather through the
  // "none" compressor.
  std::vector<CompositePhase> exact_phases(Source input, std::vector<std::int64_t> shape, int world,
                                  Sink deliver, CollectiveStats* bytes);

  std::int64_t rank_;
  std::uint64_t seed_;
  bool error_feedback_;
  std::unique_ptr<Compressor> none_;  // for exact_phases
  std::map<std::string, torch::Tensor> q_;         // (cols, r) warm start per key
  std::map<std::string, torch::Tensor> residual_;  // (rows, cols) per key
};

}  // namespace sb::comm
