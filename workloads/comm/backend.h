// Communication backends (MCR-DL's mix and match): the libraries that move the bytes of
// collectives, behind one interface, one file each, chosen by name:
//   mpi   backend_mpi.cpp   Open MPI (host memory; device tensors staged unless CUDA-aware)
//   gloo  backend_gloo.cpp  LibTorch's c10d ProcessGroupGloo (host memory, TCP)
//   nccl  backend_nccl.cpp  NCCL on device tensors (the cuda build only)
// A backend owns its transfers (transfer.h: run, start, test, wait); the progress engine
// (progress_engine.h) schedules them like any other, so which library runs a collective
// never changes when or in which order it runs: every rank issues the same collectives in
// the same order on a channel, and each library keeps that order (MPI's matching rule;
// Gloo's and NCCL's per-group sequence). The Communicator picks the backend per (operation,
// size): comm_backend = a name, or auto (backend_table.h), for plain collectives and for
// every phase of a compressed one alike (its wire buffers are a plain collective's).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>
#include <torch/types.h>

#include "workloads/comm/transfer.h"

namespace sb::comm {

// world: all ranks; shard: ranks that shard parameters among themselves (contiguous blocks of
// shard_group ranks, one emulated "node"); replica: ranks with the same shard rank; tp, pp,
// sp: the ranks that differ only in that dimension of the process mesh (harness/core/mesh.h:
// a tensor-parallel group, a pipeline's stages, a sequence-parallel group). Shard and
// Replica are the mesh's dp_shard and dp_replicate groups. Ep and Edp split the shard group
// for expert parallelism (Mesh::expert_group): ep consecutive ranks that trade tokens, and the
// ranks holding the same experts, which sum their gradients.
enum class Group { World, Shard, Replica, Tp, Pp, Sp, Ep, Edp };
constexpr int kGroups = 8;
constexpr Group kGroupList[kGroups] = {Group::World, Group::Shard, Group::Replica, Group::Tp,
                                       Group::Pp,    Group::Sp,    Group::Ep,      Group::Edp};
const char* group_name(Group g);  // world, shard, replica, tp, pp, sp, ep, edp
// The mesh dimension a group runs along, as the trace's `dim` column names it: "world" for
// all ranks, else the dimension's name (dp_shard, dp_replicate, tp, pp, sp).
const char* group_dim(Group g);

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

// Point-to-point transfers (pipeline stages' activations, the p2p micro-benchmarks): one
// contiguous tensor to or from one peer of a group, matched by (peer, tag) in issue order as
// MPI matches them. Unlike collectives they are not issued in one order by every rank (a
// stage sends forward while its neighbour sends back), so the progress engine starts them on
// the caller, never behind a queue (a send queued behind a blocked receive could deadlock).
enum class P2POp { Send, Recv };
const char* p2p_name(P2POp op);  // "send", "recv": the trace's op
struct P2PArgs {
  P2POp op = P2POp::Send;
  torch::Tensor t;  // send: read; recv: written in place (its shape and dtype say how much)
  int peer = 0;     // rank in the group
  int tag = 0;      // 0 .. 32767 (MPI guarantees tags up to 32767)
  std::uint64_t logical_bytes = 0;  // the trace's logical bytes; 0: t's (fp32 for 16-bit floats)
};

// Each group has two lanes, each its own channel in every library: plain collectives and
// one-phase compressed ones run on Plain; every phase of a chained (multi-phase) compressed
// collective runs on Chain. Under inline progress a chained collective's later phases start
// when the previous one is seen complete, a moment that differs between ranks, so the
// library's order holds only on a channel where such phases start in the same order on every
// rank: those of chained collectives, in issue order (progress_engine.h).
enum class Lane { Plain, Chain };
struct Channel {
  Group group = Group::World;
  Lane lane = Lane::Plain;
};

// The ranks a backend bootstraps over: the Communicator's MPI communicators of each group
// and lane (indexed by Group), for the backend's own use.
struct GroupComms {
  MPI_Comm comm[kGroups] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL,
                            MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
  MPI_Comm chain[kGroups] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL,
                             MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
  MPI_Comm of(Group g, Lane l = Lane::Plain) const {
    return (l == Lane::Plain ? comm : chain)[static_cast<int>(g)];
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Why this backend cannot run a collective on these buffers and lane (empty when it can),
  // naming the fix: gloo on device tensors, nccl on host ones.
  virtual std::string refuses(const CollArgs& a, Lane lane) const = 0;
  // The transfer of a on channel ch (checked by refuses), not yet started. Made on the thread
  // that issues a plain collective (nccl orders it after the work issued so far on that
  // thread's stream) or that starts a compressed collective's phase. It keeps a's tensors
  // alive until it is destroyed.
  virtual std::unique_ptr<Transfer> transfer(const CollArgs& a, Channel ch) = 0;
  // The same for a point-to-point transfer on group g (checked by the Communicator: peer in
  // the group, not this rank): refuses_p2p names why not (empty when it can), p2p makes it.
  virtual std::string refuses_p2p(const P2PArgs& a) const = 0;
  virtual std::unique_ptr<Transfer> p2p(const P2PArgs& a, Group g) = 0;
};

// Construction is collective over every rank of the world (it bootstraps over MPI).
using BackendFactory = std::function<std::unique_ptr<Backend>(const GroupComms&)>;
struct BackendInfo {
  std::string name, doc;
  bool available = true;        // compiled into this build
  std::string unavailable_why;  // and how to get it, when not
  BackendFactory make;
  // Its transfers move without the caller calling into the library once started (Gloo's
  // worker thread, NCCL's stream): the thread runners start them on the caller instead of
  // handing them to the communication thread (Phase::alone).
  bool alone = false;
};
void register_backend(BackendInfo info);  // also registers the name for `comm_backend`; a duplicate fails
const BackendInfo* find_backend(const std::string& name);
const std::vector<BackendInfo>& backends();
std::unique_ptr<Backend> make_backend(const std::string& name, const GroupComms& groups);

}  // namespace sb::comm
