// One collective benchmark case (nccl-tests style): an operation, an implementation and a
// message size, with deterministic inputs and a correctness check that runs after the timed
// loop. Shared by the Google Benchmark program (suite/micro/collectives.cpp) and the `micro`
// task, so both measure exactly the same thing.
//
// Implementations, chosen by name:
//   mpi          raw MPI on float buffers (the baseline)
//   ours         sb::comm::Communicator's synchronous calls (blocking MPI on the caller)
//   ours-async   sb::comm::Communicator's requests, run by its communication thread
//   <compressor> compressed collective (fp16, bf16, int8, topk) through the Communicator's
//                synchronous calls (its backend); only for all_gather, reduce_scatter and
//                all_reduce
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mpi.h>
#include <torch/types.h>

#include "workloads/comm/backend.h"

namespace sb::comm {
class Communicator;
class Compressor;
}  // namespace sb::comm

namespace sb::micro {

using Op = comm::CollOp;  // the collectives' one list (workloads/comm/backend.h)
Op op_from_name(const std::string& name);  // error lists the known names
const char* op_name(Op op);
std::vector<std::string> op_names();
// The uncompressed implementations (name, what it is), in the order above: the one list.
const std::vector<std::pair<std::string, std::string>>& plain_impls();
std::vector<std::string> impl_names();     // the plain implementations and the compressors
bool is_compressed(const std::string& impl);  // a compressor's name, not a plain one

struct CaseConfig {
  Op op = Op::AllReduce;
  std::string impl = "mpi";
  std::int64_t bytes = 4;  // nccl-tests "size": the total buffer (all_gather: output,
                           // reduce_scatter: input, all_to_all: each side), in fp32
  std::int64_t block = 256;   // int8 compressor
  double ratio = 0.01;        // topk compressor
};

// An uncompressed case's sizes, which need no communicator: the fp32 elements of the total
// buffer (split ops: a whole number per rank), its bytes, and what a rank sends (wire) and
// the requested size's fp32 collective would (logical), as CollectiveCase reports them.
struct PlainSizes {
  std::int64_t count = 0, size_bytes = 0, wire_bytes = 0;
  std::uint64_t logical_bytes = 0;
};
PlainSizes plain_sizes(Op op, std::int64_t bytes, int ranks);

class CollectiveCase {
 public:
  // world: the ranks taking part. comm: our communicator on the same ranks (needed for
  // ours / ours-async; may be null otherwise).
  CollectiveCase(const CaseConfig& cfg, MPI_Comm world, comm::Communicator* comm);
  ~CollectiveCase();

  void run();                 // one call of the collective (buffers as they are)
  // Fills inputs with exact small integers, runs once, and counts result elements that
  // differ from the expected value ("#wrong"; 0 when correct). Call after the timed loop.
  std::int64_t check();

  std::int64_t count() const { return count_; }           // fp32 elements of the total buffer
  std::int64_t size_bytes() const { return count_ * 4; }  // the nccl-tests size
  std::int64_t wire_bytes() const;                        // this rank's bytes to MPI per call
  // What the uncompressed fp32 collective of the requested size sends per rank (the
  // baseline of the compression ratio, docs/METRICS.md "Compression"): all-reduce of the
  // unpadded bytes / 4 elements, as plain and compressed cases both ask for.
  std::uint64_t logical_bytes() const;
  const CaseConfig& config() const { return cfg_; }

 private:
  void fill(std::int64_t salt);
  CaseConfig cfg_;
  MPI_Comm world_;
  comm::Communicator* comm_;
  int rank_ = 0, n_ = 1;
  std::int64_t count_ = 0;
  torch::Tensor in_, out_;
  std::unique_ptr<comm::Compressor> compressor_;
};

struct Timing {
  double mean_s = 0;      // mean per call of the slowest rank (max over ranks of each call)
  double rank_min_s = 0;  // min over ranks of the rank's mean
  double rank_max_s = 0;  // max over ranks of the rank's mean
  std::vector<double> per_call_s;    // slowest rank's time of every timed call
  std::vector<double> local_call_s;  // this rank's own time of every timed call
  std::vector<double> start_wtime;   // MPI_Wtime() at the start of every timed call
};

// warmup untimed calls, then `iters` calls, each started after a barrier and timed on every
// rank; a call's time is the slowest rank's (MPI_Allreduce MAX outside the timed region).
Timing time_case(CollectiveCase& c, int warmup, int iters, MPI_Comm world);

// Iterations for a size so that a case takes roughly the same time (same on every rank).
int default_iterations(std::int64_t bytes);

}  // namespace sb::micro
