// Communication backends (MCR-DL's mix and match): the libraries that move the bytes of the
// plain collectives, behind one interface, one file each, chosen by name:
//   mpi   backend_mpi.cpp   Open MPI (host memory; device tensors staged unless CUDA-aware)
//   gloo  backend_gloo.cpp  LibTorch's c10d ProcessGroupGloo (host memory, TCP)
//   nccl  backend_nccl.cpp  NCCL on device tensors (the cuda build only)
// A backend turns one collective into a Phase (progress_engine.h) that the progress engine
// runs like any other, so which library runs a collective never changes when or in which
// order it runs: every rank issues the same collectives in the same order on a group, and
// each library keeps that order (MPI's matching rule; Gloo's and NCCL's per-group sequence).
// The Communicator picks the backend per (operation, size): comm_backend = a name, or auto
// (backend_table.h). The compressed collectives' chained phases run on MPI (their own
// communicators); only the plain collectives are dispatched.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>
#include <torch/types.h>

#include "workloads/comm/progress_engine.h"

namespace sb::comm {

// world: all ranks; shard: ranks that shard parameters among themselves (contiguous blocks of
// shard_group ranks, one emulated "node"); replica: ranks with the same shard rank.
enum class Group { World, Shard, Replica };
const char* group_name(Group g);

enum class ReduceOp { Sum, Max, Min };

// The plain collectives, and their names in traces, suites and tuning tables.
enum class CollOp { AllGather, ReduceScatter, AllReduce, Broadcast, AllToAll };
const char* coll_name(CollOp op);
CollOp coll_from_name(const std::string& name);  // the error lists the known names
constexpr CollOp kCollOps[] = {CollOp::AllGather, CollOp::ReduceScatter, CollOp::AllReduce,
                               CollOp::Broadcast, CollOp::AllToAll};

// One collective's buffers, as the Communicator's API takes them (checked there): in and out
// are the same tensor for all_reduce and broadcast (in place).
//   all_gather      out (size * n) <- every rank's in (n), in rank order
//   reduce_scatter  out (n) <- op over ranks of in (size * n), this rank's block
//   all_reduce      out <- op over ranks
//   broadcast       out <- root's
//   all_to_all      out block j <- rank j's in block rank
struct CollArgs {
  CollOp op = CollOp::AllReduce;
  torch::Tensor in, out;
  ReduceOp red = ReduceOp::Sum;
  int root = 0;
};

// The ranks a backend bootstraps over: the Communicator's MPI communicators of each group
// (indexed by Group), duplicated for the backend's own use.
struct GroupComms {
  MPI_Comm comm[3] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
  MPI_Comm of(Group g) const { return comm[static_cast<int>(g)]; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Why this backend cannot run a collective on these buffers (empty when it can), naming
  // the fix: gloo on device tensors, nccl on host ones.
  virtual std::string refuses(const CollArgs& a) const = 0;
  // The phase that runs a on group g: `blocking`/`start` (MPI) or `launch` (others). Its
  // functions may keep the tensors alive until the engine drops the phase.
  virtual Phase phase(const CollArgs& a, Group g) = 0;
};

// Construction is collective over every rank of the world (it bootstraps over MPI).
using BackendFactory = std::function<std::unique_ptr<Backend>(const GroupComms&)>;
struct BackendInfo {
  std::string name, doc;
  bool available = true;        // compiled into this build
  std::string unavailable_why;  // and how to get it, when not
  BackendFactory make;
};
void register_backend(BackendInfo info);  // also registers the name for `comm_backend`
const BackendInfo* find_backend(const std::string& name);
const std::vector<BackendInfo>& backends();
std::unique_ptr<Backend> make_backend(const std::string& name, const GroupComms& groups);

}  // namespace sb::comm
