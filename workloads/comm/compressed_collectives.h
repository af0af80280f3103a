// Compressed collectives: parameter all-gather, gradient reduce-scatter and gradient
// all-reduce. Each is described as phases around plain collectives (composite.h: compress
// into a wire buffer, one plain all-gather or all-to-all of it, decompress or reduce), so
// that the communicator runs it like a plain collective, on whichever backend it routes the
// wires to (Communicator::issue: backend, progress, overlap, trace event); the blocking
// functions below issue the same descriptions synchronously.
// Every result equals "decompress every rank's contribution, then reduce in fp32 in rank
// order" exactly, and is bit-identical on every rank (tests/mpi/compressed_collectives.cpp).
// Sums, not means: divide by the group size yourself where the optimizer wants a mean.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "workloads/comm/communicator.h"
#include "workloads/comm/composite.h"
#include "workloads/comm/compress_powersgd.h"
#include "workloads/comm/compressor.h"
#include "workloads/comm/error_feedback.h"
#include "workloads/comm/policy.h"
#include "workloads/comm/whole_all_reduce.h"

namespace sb::comm {

// Per call and per rank, the bytes this rank sends to the other ranks (the busbw convention;
// chunks addressed to itself are not on the wire). logical_bytes: what the uncompressed fp32
// collective of the same buffer sends, to the byte what the plain path records for it
// (comm::wire_bytes(op, fp32_bytes, n)); wire_bytes: what this one sends. logical / wire is
// the compression ratio against an uncompressed fp32 run. docs/METRICS.md "Compression" has
// the formulas per collective. Both follow from the sizes alone: they are known when the
// collective is described.
struct CollectiveStats {
  std::int64_t logical_bytes = 0;
  std::int64_t wire_bytes = 0;
  double ratio() const { return wire_bytes > 0 ? double(logical_bytes) / double(wire_bytes) : 1.0; }
  CollectiveStats& operator+=(const CollectiveStats& o);
};

// A compressed collective described for the communicator, and its bytes.
struct CompressedOp {
  Composite run;  // phases, reads, writes; the communicator adds backends and the trace
  CollectiveStats bytes;
};

// ---- blocking, on group g of comm (each issues its description synchronously, traced as
// kind "other") -------------------------------------------------------------------------------
// world below: comm.size(g).
// Parameter all-gather. shard: (s) fp32, the same s on every rank -> (world * s) fp32 where
// [r*s, (r+1)*s) = D(C(shard of rank r)); the own shard too goes through D(C(.)), so every
// rank computes with the same parameters. One all-gather of wire_bytes(s) per rank.
torch::Tensor compressed_all_gather(const torch::Tensor& shard, Compressor& c,
                                    Communicator& comm, Group g,
                                    CollectiveStats* stats = nullptr);

// The same into full ((world * s), contiguous, any float dtype), from a shard of any float
// dtype, with no detour through fp32 for cast wires (none, fp16, bf16): the shard is cast
// once to the wire dtype, and a wire of full's dtype is received straight into full (else
// one cast). Values are those of compressed_all_gather cast to full's dtype.
void compressed_all_gather_into(const torch::Tensor& shard, const torch::Tensor& full,
                                Compressor& c, Communicator& comm, Group g,
                                CollectiveStats* stats = nullptr);

// Gradient reduce-scatter. full: (world * s) fp32 -> (s) fp32 on rank r:
//   sum over q = 0..world-1 (in order, fp32) of D(C(chunk r of rank q's e)),
// e = full (+ error-feedback residual[key] when ef is given). One all-to-all of
// wire_bytes(s) per destination; topk chunks are sparse and are added sparsely.
torch::Tensor compressed_reduce_scatter(const torch::Tensor& full, Compressor& c,
                                        Communicator& comm, Group g,
                                        CollectiveStats* stats = nullptr,
                                        ErrorFeedback* ef = nullptr, const std::string& key = {});

// Gradient all-reduce. x: (n) fp32, any n (zero-padded to a multiple of world inside) ->
// (n) fp32, identical on every rank: compressed_reduce_scatter (error-feedback key `key`)
// then compressed_all_gather of the reduced chunks (key `key + "/gather"`).
// kind: the trace's (tensor parallelism passes tp_act / tp_grad).
torch::Tensor compressed_all_reduce(const torch::Tensor& x, Compressor& c, Communicator& comm,
                                    Group g, CollectiveStats* stats = nullptr,
                                    ErrorFeedback* ef = nullptr, const std::string& key = {},
                                    const std::string& kind = "other");

// The policy applied: one compressor (and error-feedback state, a whole all-reduce's state) per kind.
// The *_op calls only describe (they read no state); the phases they return use the kind's
// compressor and state when they run. Phases of one kind must run on one thread at a time:
// the progress engine runs them on its communication thread in issue order, or all on the
// caller (inline, synchronous calls), so issue every collective of one CompressedCollectives
// through one communicator. Kinds are independent. `key` names the buffer (e.g. "unit3"):
// residuals and a whole all-reduce's state (PowerSGD's warm start) are kept per key, so use a stable key per flat buffer.
class CompressedCollectives {
 public:
  // rank: this process's world rank, mixed into the stochastic-rounding seed so that ranks
  // round independently.
  CompressedCollectives(const Policy& policy, int rank);
  const Policy& policy() const { return policy_; }
  bool compresses(CollectiveKind k) const { return policy_.compresses(k); }

  // world: ranks of the group the op will run on.
  // shard ((s), the fp32 master) -> full ((world * s), the param dtype), in place; see
  // compressed_all_gather_into. The wire carries the shard rounded to full's dtype, what
  // every rank computes with (a bf16 wire for bf16 params: one cast, received in place).
  // One phase (an all-gather of the wires).
  CompressedOp all_gather_params_op(const torch::Tensor& shard, const torch::Tensor& full,
                                    int world);
  // shard ((s), any float dtype) <- full ((world * s), any float dtype, read as fp32); see
  // compressed_reduce_scatter. One phase (an all-to-all of the wires).
  CompressedOp reduce_scatter_grads_op(const std::string& key, const torch::Tensor& full,
                                       const torch::Tensor& shard, int world);
  // t ((n), any float dtype, read as fp32) <- the sum, in place: compressed_all_reduce (two
  // phases) of an element-wise compressor, or the phases of a whole all-reduce (PowerSGD:
  // four) when the policy's grad_all_reduce is one.
  CompressedOp all_reduce_grads_op(const std::string& key, const torch::Tensor& t, int world);

  // The same, blocking on group g of comm (traced as their kinds): (world * s) fp32 -> (s)
  // and (n) fp32 -> (n).
  torch::Tensor reduce_scatter_grads(const std::string& key, const torch::Tensor& full,
                                     Communicator& comm, Group g,
                                     CollectiveStats* stats = nullptr);
  torch::Tensor all_reduce_grads(const std::string& key, const torch::Tensor& x,
                                 Communicator& comm, Group g, CollectiveStats* stats = nullptr);

  // Bytes of compression state this rank holds (residuals, a whole all-reduce's state such as
  // PowerSGD's Q): model-state memory.
  std::int64_t state_bytes() const;
  // What state_bytes() grows by once a collective of kind k ran on a new key among `world`
  // ranks, from the sizes alone (plan's prediction): n = the elements of the full buffer
  // (reduce-scatter: world x the shard; all-reduce: the buffer). Error feedback keeps the
  // residual of what was compressed: the reduce-scatter's whole input (4 n), the all-reduce's
  // padded input and its reduced chunk (4 n' + 4 n'/world, n' = world ceil(n/world));
  // a whole all-reduce: its record's state_bytes. The parameter gather keeps nothing.
  static std::int64_t state_bytes_of(const Policy& p, CollectiveKind k, std::int64_t n,
                                     int world);
  // The bytes one collective of kind k on a full buffer of n elements among `world` ranks
  // puts on the wire from this rank, under p (docs/COMPRESSION.md "Wire bytes of one step"):
  // uncompressed, comm::wire_bytes of n elements of elt_bytes each; compressed, (world - 1)
  // wires of the shard n / world (gather, reduce-scatter; n a multiple of world), twice that
  // of ceil(n / world) for the all-reduce, a whole all-reduce's record's wire_bytes. 0 for one
  // rank.
  static std::int64_t wire_bytes_of(const Policy& p, CollectiveKind k, std::int64_t n, int world,
                                    std::int64_t elt_bytes);
  // Everything a later call depends on (error-feedback residuals, a whole all-reduce's state,
  // stochastic-rounding generators), for checkpoints; load_state replaces it all. Call both
  // only while no collective runs. Names: param/, grad/, allreduce/ (compressors), grad_ef/,
  // allreduce_ef/, <name>/ of a whole all-reduce (powersgd/).
  StateDict state() const;
  void load_state(const StateDict& s);

 private:
  Policy policy_;
  std::unique_ptr<Compressor> param_, grad_, allreduce_;  // allreduce_ null for a whole one
  ErrorFeedback grad_ef_, allreduce_ef_;
  std::unique_ptr<WholeAllReduce> whole_;  // the all-reduce's, when its form is whole
  std::string whole_prefix() const { return policy_.grad_all_reduce.name + "/"; }
};

// ---- building blocks (compressed_collectives.cpp, compress_powersgd.cpp) -------------------
// Functions that make a phase's input or receive its output, called when the phase runs.
using Source = std::function<torch::Tensor()>;
using Sink = std::function<void(const torch::Tensor&)>;

// Issues a description synchronously on group g of comm and waits for it: one trace event
// `op` of `kind` with its bytes.
void run_on(CompressedOp op, Communicator& comm, Group g, const char* name,
            const std::string& kind = "other");

// A compressed all-reduce of the (n) fp32 tensor input() returns, delivered as (n) fp32:
// a reduce-scatter phase (error-feedback key `key`) and an all-gather phase of the reduced
// chunk (key `key + "/gather"`); ef may be null. Adds its bytes to *bytes.
std::vector<CompositePhase> all_reduce_phases(Source input, std::int64_t n, Compressor* c,
                                              ErrorFeedback* ef, const std::string& key,
                                              int world, Sink deliver, CollectiveStats* bytes);

}  // namespace sb::comm
