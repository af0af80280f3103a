// Compressed collectives over a raw MPI_Comm (no dependency on the FSDP communicator):
// parameter all-gather, gradient reduce-scatter and gradient all-reduce, each returning the
// result and filling CollectiveStats, which the caller turns into sb::CommEvent records.
// Every result equals "decompress every rank's contribution, then reduce in fp32 in rank
// order" exactly, and is bit-identical on every rank (tests/mpi/compressed_collectives.cpp).
// Sums, not means: divide by the group size yourself where the optimizer wants a mean.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <mpi.h>
#include <torch/types.h>

#include "workloads/comm/compress_powersgd.h"
#include "workloads/comm/compressor.h"
#include "workloads/comm/error_feedback.h"
#include "workloads/comm/policy.h"

namespace sb::comm {

// Per call and per rank. logical_bytes: the fp32 bytes this rank hands to MPI to send in the
// uncompressed equivalent; wire_bytes: the bytes it actually hands to MPI (chunks addressed
// to itself included in both, so that logical / wire is exactly the compression ratio).
// docs/METRICS.md "Compression" has the formulas per collective.
struct CollectiveStats {
  std::int64_t logical_bytes = 0;
  std::int64_t wire_bytes = 0;
  double seconds = 0;        // whole call: compress + MPI + decompress/reduce
  double codec_seconds = 0;  // of which compress + decompress + local reduction
  double ratio() const { return wire_bytes > 0 ? double(logical_bytes) / double(wire_bytes) : 1.0; }
  CollectiveStats& operator+=(const CollectiveStats& o);
};

// Parameter all-gather. shard: (s) fp32, the same s on every rank -> (world * s) fp32 where
// [r*s, (r+1)*s) = D(C(shard of rank r)); the own shard too goes through D(C(.)), so every
// rank computes with the same parameters. One MPI_Allgather of wire_bytes(s) per rank.
torch::Tensor compressed_all_gather(const torch::Tensor& shard, Compressor& c, MPI_Comm comm,
                                    CollectiveStats* stats = nullptr);

// The same into full ((world * s), contiguous, any float dtype), from a shard of any float
// dtype, with no detour through fp32 for cast wires (none, fp16, bf16): the shard is cast
// once to the wire dtype, and a wire of full's dtype is received straight into full (else
// one cast). Values are those of compressed_all_gather cast to full's dtype.
void compressed_all_gather_into(const torch::Tensor& shard, const torch::Tensor& full,
                                Compressor& c, MPI_Comm comm, CollectiveStats* stats = nullptr);

// Gradient reduce-scatter. full: (world * s) fp32 -> (s) fp32 on rank r:
//   sum over q = 0..world-1 (in order, fp32) of D(C(chunk r of rank q's e)),
// e = full (+ error-feedback residual[key] when ef is given). One MPI_Alltoall of
// wire_bytes(s) per destination; topk chunks are sparse and are added sparsely.
torch::Tensor compressed_reduce_scatter(const torch::Tensor& full, Compressor& c, MPI_Comm comm,
                                        CollectiveStats* stats = nullptr,
                                        ErrorFeedback* ef = nullptr, const std::string& key = {});

// Gradient all-reduce. x: (n) fp32, any n (zero-padded to a multiple of world inside) ->
// (n) fp32, identical on every rank: compressed_reduce_scatter (error-feedback key `key`)
// then compressed_all_gather of the reduced chunks (key `key + "/gather"`).
torch::Tensor compressed_all_reduce(const torch::Tensor& x, Compressor& c, MPI_Comm comm,
                                    CollectiveStats* stats = nullptr, ErrorFeedback* ef = nullptr,
                                    const std::string& key = {});

// The policy applied: one compressor (and error-feedback state, PowerSGD state) per kind.
// Calls of different kinds may run concurrently on different threads; calls of one kind must
// come from one thread at a time. `key` names the buffer (e.g. "unit3"): residuals and
// PowerSGD's warm start are kept per key, so use a stable key per flat buffer.
class CompressedCollectives {
 public:
  // rank: this process's world rank, mixed into the stochastic-rounding seed so that ranks
  // round independently.
  CompressedCollectives(const Policy& policy, int rank);
  const Policy& policy() const { return policy_; }
  bool compresses(CollectiveKind k) const { return policy_.compresses(k); }

  // shard ((s), the fp32 master) -> full ((world * s), the param dtype), in place; see
  // compressed_all_gather_into. The wire carries the shard rounded to full's dtype, what
  // every rank computes with (a bf16 wire for bf16 params: one cast, received in place).
  void all_gather_params(const torch::Tensor& shard, const torch::Tensor& full, MPI_Comm comm,
                         CollectiveStats* stats = nullptr);
  // (world * s) -> (s); see compressed_reduce_scatter.
  torch::Tensor reduce_scatter_grads(const std::string& key, const torch::Tensor& full,
                                     MPI_Comm comm, CollectiveStats* stats = nullptr);
  // (n) -> (n); PowerSGD (all_reduce_flat) when the policy's grad_all_reduce is "powersgd".
  torch::Tensor all_reduce_grads(const std::string& key, const torch::Tensor& x, MPI_Comm comm,
                                 CollectiveStats* stats = nullptr);

  // Bytes of compression state this rank holds (residuals, PowerSGD Q): model-state memory.
  std::int64_t state_bytes() const;
  // Everything a later call depends on (error-feedback residuals, PowerSGD's Q and residuals,
  // stochastic-rounding generators), for checkpoints; load_state replaces it all. Call both
  // only while no collective runs. Names: param/, grad/, allreduce/ (compressors), grad_ef/,
  // allreduce_ef/, powersgd/.
  StateDict state() const;
  void load_state(const StateDict& s);

 private:
  Policy policy_;
  std::unique_ptr<Compressor> param_, grad_, allreduce_;  // allreduce_ null for powersgd
  ErrorFeedback grad_ef_, allreduce_ef_;
  std::unique_ptr<PowerSGD> powersgd_;
};

}  // namespace sb::comm
