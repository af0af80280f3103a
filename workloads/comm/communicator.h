// Tensor collectives for the FSDP engine: all-gather, reduce-scatter, all-reduce, broadcast,
// all-to-all, blocking and non-blocking, on the world, shard and replica groups (MPI
// communicators, which every backend bootstraps over). Each collective is checked and
// accounted here once (buffers, bytes, trace event) and its bytes moved by a transfer of
// the backend chosen for it (backend.h: MPI, Gloo, NCCL). The compressed ones are described
// in compressed_collectives.h as phases around plain collectives and run through issue(),
// each phase's plain collective on the backend chosen for it the same way. How and when they
// run (a communication thread, or inline on the caller) is the progress engine's
// (progress_engine.h): Open MPI has no asynchronous progress on shared memory.
// Every collective reports one sb::CommEvent to the trace hook (on the thread that completes
// it, before its request completes).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>
#include <torch/types.h>

#include "harness/core/mesh.h"
#include "harness/trace/records.h"
#include "workloads/comm/backend.h"
#include "workloads/comm/composite.h"
#include "workloads/comm/progress_engine.h"

namespace sb { class Point; }

namespace sb::comm {

class BackendTable;

// Which library runs each plain collective (backend.h): a backend's name, or "auto": per
// (operation, size) from the tuning table at `table` (backend_table.h).
struct BackendChoice {
  std::string name = "mpi";
  std::string table;
};
// A point's comm_backend and comm_tuning (backend_keys.cpp).
BackendChoice backend_choice(const sb::Point& p);

using TraceHook = std::function<void(const sb::CommEvent&)>;

class Communicator {
 public:
  // world is duplicated (our traffic never matches the caller's). shard_group: ranks per
  // shard group; 0 = ranks per node (MPI_COMM_TYPE_SHARED). It must divide the world size.
  // async=false runs every collective on the caller (no thread; also without
  // MPI_THREAD_MULTIPLE). backend: the library of every collective; made here, collectively
  // (Gloo and NCCL bootstrap over MPI); an "auto" table that does not fit this world and
  // these hosts fails on every rank.
  explicit Communicator(MPI_Comm world, int shard_group = 0, bool async = true,
                        const BackendChoice& backend = {});
  // The groups from a process mesh (harness/core/mesh.h): Shard = the ranks differing only in
  // dp_shard and sp (sequence-parallel ranks share parameters), Replica = only in
  // dp_replicate, Tp / Pp / Sp = only in that dimension, Ep / Edp = mesh.ep's split of the
  // shard group (Mesh::expert_group), World = all. A mesh with dp_shard = 0 and
  // dp_replicate = 0 takes the ranks of a node as the shard group (hybrid sharding's default).
  // The mesh's product must be the world's size (else every rank fails alike).
  Communicator(MPI_Comm world, const sb::Mesh& mesh, bool async = true,
               const BackendChoice& backend = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // The mesh this communicator's groups were built from, resolved (no 0 sizes).
  const sb::Mesh& mesh() const { return mesh_; }
  int rank(Group g = Group::World) const;
  int size(Group g = Group::World) const;
  // Whether this rank speaks for its model-parallel ranks (rank 0 of its tp and pp groups): a
  // quantity they all hold alike (a tp group's loss, a pipeline's last-stage loss) is counted
  // once per data-parallel rank by summing only the speakers'.
  bool model_parallel_leader() const { return rank(Group::Tp) == 0 && rank(Group::Pp) == 0; }
  MPI_Comm mpi(Group g) const;
  // A communication thread may run collectives beside the caller.
  bool async() const { return async_; }
  // How requests (..._async) progress: a runner by its `comm_progress` name
  // (progress_engine.h); the same on every rank, set before the first request. Default thread.
  void set_progress(const std::string& name);
  void set_progress(ProgressMode p) { set_progress(progress_name(p)); }
  ProgressMode progress_mode() const { return progress_from_name(progress_->name); }
  // What a result records: the runner's name, or "blocking" for a thread runner without a
  // thread (every collective ran blocking on the caller).
  std::string progress_label() const;
  // Inline: moves outstanding requests (a no-op when none is outstanding).
  void progress() { engine_->progress(); }

  // All tensors: contiguous, same dtype; outputs are written in place (raw memory: their
  // autograd version counters do not change). kind labels the trace event
  // (param_all_gather, grad_reduce_scatter, grad_all_reduce, other).
  // full (size(g) * n) <- every rank's shard (n), in rank order.
  Request all_gather_async(const torch::Tensor& shard, const torch::Tensor& full, Group g,
                           const std::string& kind = "other") {
    return all_gather_impl(shard, full, g, kind, false);
  }
  // shard (n) <- op over ranks of full (size(g) * n), this rank's block.
  Request reduce_scatter_async(const torch::Tensor& full, const torch::Tensor& shard, Group g,
                               const std::string& kind = "other", ReduceOp op = ReduceOp::Sum) {
    return reduce_scatter_impl(full, shard, g, kind, op, false);
  }
  // t <- op over ranks of t, in place.
  Request all_reduce_async(const torch::Tensor& t, Group g, const std::string& kind = "other",
                           ReduceOp op = ReduceOp::Sum) {
    return all_reduce_impl(t, g, kind, op, false);
  }
  // t <- root's t.
  Request broadcast_async(const torch::Tensor& t, int root, Group g,
                          const std::string& kind = "other") {
    return broadcast_impl(t, root, g, kind, false);
  }
  // out block j (n) <- rank j's in block rank(g); in and out (size(g) * n).
  Request all_to_all_async(const torch::Tensor& in, const torch::Tensor& out, Group g,
                           const std::string& kind = "other") {
    return all_to_all_impl(in, out, g, kind, false);
  }

  void all_gather(const torch::Tensor& shard, const torch::Tensor& full, Group g,
                  const std::string& kind = "other") { all_gather_impl(shard, full, g, kind, true).wait(); }
  void reduce_scatter(const torch::Tensor& full, const torch::Tensor& shard, Group g,
                      const std::string& kind = "other", ReduceOp op = ReduceOp::Sum) {
    reduce_scatter_impl(full, shard, g, kind, op, true).wait();
  }
  void all_reduce(const torch::Tensor& t, Group g, const std::string& kind = "other",
                  ReduceOp op = ReduceOp::Sum) { all_reduce_impl(t, g, kind, op, true).wait(); }
  void broadcast(const torch::Tensor& t, int root, Group g, const std::string& kind = "other") {
    broadcast_impl(t, root, g, kind, true).wait();
  }
  void all_to_all(const torch::Tensor& in, const torch::Tensor& out, Group g,
                  const std::string& kind = "other") { all_to_all_impl(in, out, g, kind, true).wait(); }
  // Point-to-point: t to (send) or from (recv, written in place) rank `peer` of group g,
  // matched with the peer's recv/send by (peer, tag) in issue order, as MPI matches. Unlike
  // collectives these start on the caller at issue in every progress mode (backend.h
  // P2POp), never queued behind the communication thread, so a rank may post a receive and a
  // send to its neighbours in either order without deadlock (nccl excepted: its one stream
  // runs them in issue order). A non-blocking transfer moves when its library moves it: MPI's
  // inside test()/wait() and other MPI calls, Gloo's and NCCL's on their own. The blocking
  // forms are the library's blocking call on the caller (MPI_Send / MPI_Recv). Trace: op send
  // or recv, peer = the peer's world rank, bytes = the message's (docs/METRICS.md).
  // logical_bytes: a compressed message's uncompressed size for the trace (0: t's own, fp32
  // for 16-bit floats).
  Request send_async(const torch::Tensor& t, int peer, Group g, const std::string& kind = "other",
                     int tag = 0, std::uint64_t logical_bytes = 0) {
    return p2p_impl({P2POp::Send, t, peer, tag, logical_bytes}, g, kind, false);
  }
  Request recv_async(const torch::Tensor& t, int peer, Group g, const std::string& kind = "other",
                     int tag = 0, std::uint64_t logical_bytes = 0) {
    return p2p_impl({P2POp::Recv, t, peer, tag, logical_bytes}, g, kind, false);
  }
  void send(const torch::Tensor& t, int peer, Group g, const std::string& kind = "other",
            int tag = 0, std::uint64_t logical_bytes = 0) {
    p2p_impl({P2POp::Send, t, peer, tag, logical_bytes}, g, kind, true).wait();
  }
  void recv(const torch::Tensor& t, int peer, Group g, const std::string& kind = "other",
            int tag = 0, std::uint64_t logical_bytes = 0) {
    p2p_impl({P2POp::Recv, t, peer, tag, logical_bytes}, g, kind, true).wait();
  }
  // The world rank of rank r of group g.
  int world_rank(Group g, int r) const { return members_[static_cast<int>(g)].at(r); }

  // A scalar all-reduce (loss, norms) on the calling thread's queue position.
  double all_reduce_scalar(double v, Group g, ReduceOp op = ReduceOp::Sum);
  // A collective made of plain ones (the compressed ones, compressed_collectives.h), run on
  // group g like the ones above: each phase's plain collective checked and routed to a
  // backend like theirs (a multi-phase one on the group's chain lane, backend.h), the same
  // progress, overlap and one trace event (`op` with the given bytes, the backend that ran
  // its phases: two joined by "+" when an "auto" table split them). sync: complete on
  // return, as the blocking calls above.
  Request issue(Composite c, Group g, const char* op, const std::string& kind,
                std::uint64_t logical_bytes, std::uint64_t wire_bytes, bool sync = false);

  // Trace: hook gets every event; times are seconds since origin; step labels events.
  void set_trace_hook(TraceHook hook, double origin_wtime);
  void set_step(std::int64_t step) { step_ = step; }

  // Seconds the caller spent blocked in Request::wait() since the last reset.
  double exposed_s() const { return engine_->exposed_s(); }
  void reset_exposed() { engine_->reset_exposed(); }

  // comm_backend as given ("mpi", "gloo", "nccl", "auto"), and for provenance where an
  // "auto" table came from ("" otherwise).
  const std::string& backend_name() const { return choice_.name; }
  std::string backend_source() const;

 private:
  using Span = detail::Span;
  static Span span(const torch::Tensor& t) {
    return {static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes())};
  }
  // What the collective's trace event says, reported when it completes.
  std::function<void(double, double)> traced(const char* op, Group g, const std::string& kind,
                                             std::function<std::string()> backend,
                                             std::uint64_t logical, std::uint64_t wire,
                                             int peer = -1);
  void trace(const char* op, Group g, const std::string& kind, const std::string& backend,
             std::uint64_t logical_bytes, std::uint64_t wire_bytes, double t0, double t1,
             int peer = -1);
  // A collective's buffers against its operation and group (the errors name both).
  void check(const CollArgs& a, Group g) const;
  // The backend that runs a on lane: the named one, or the table's for its size; a host
  // collective a device backend refuses runs on mpi; a refusal otherwise is an error.
  Backend& route(const CollArgs& a, Lane lane);
  bool alone(const Backend& b) const;  // its BackendInfo::alone
  Backend& pick(CollOp op, std::uint64_t bytes);
  // Checks a plain collective, makes its transfer on the backend routed to and issues it.
  Request run(const CollArgs& a, Group g, const std::string& kind, bool sync);
  Request all_gather_impl(const torch::Tensor& shard, const torch::Tensor& full, Group g,
                          const std::string& kind, bool sync);
  Request reduce_scatter_impl(const torch::Tensor& full, const torch::Tensor& shard, Group g,
                              const std::string& kind, ReduceOp op, bool sync);
  Request all_reduce_impl(const torch::Tensor& t, Group g, const std::string& kind, ReduceOp op,
                          bool sync);
  Request broadcast_impl(const torch::Tensor& t, int root, Group g, const std::string& kind,
                         bool sync);
  Request all_to_all_impl(const torch::Tensor& in, const torch::Tensor& out, Group g,
                          const std::string& kind, bool sync);
  Request p2p_impl(const P2PArgs& a, Group g, const std::string& kind, bool sync);

  void build(MPI_Comm world, sb::Mesh mesh, bool async);
  sb::Mesh mesh_;
  MPI_Comm world_ = MPI_COMM_NULL;  // = groups_[World]
  GroupComms groups_;  // every group's plain and chain lane (backend.h)
  int rank_[kGroups] = {}, size_[kGroups] = {1, 1, 1, 1, 1, 1, 1, 1};
  std::vector<int> members_[kGroups];  // each group's world ranks, in group-rank order
  BackendChoice choice_;
  std::vector<std::unique_ptr<Backend>> backends_;  // the one named, or the table's; mpi
  std::vector<bool> alone_;                         // each one's BackendInfo::alone
  Backend* mpi_ = nullptr;                          // always among them
  std::shared_ptr<const BackendTable> table_;        // "auto"
  // "auto": per collective (CollOp), sizes up to .first run on .second (BackendTable::routes).
  std::vector<std::vector<std::pair<std::uint64_t, Backend*>>> routes_;
  std::int64_t step_ = 0;
  TraceHook hook_;
  double origin_ = 0;
  bool async_ = false;
  const ProgressInfo* progress_ = nullptr;
  std::unique_ptr<ProgressEngine> engine_;  // destroyed first (~Communicator)
};

// The nccl-tests bus factor of a collective among n ranks (docs/METRICS.md): all_gather /
// reduce_scatter / all_to_all (n-1)/n, all_reduce 2(n-1)/n, broadcast 1; 0 for every
// operation when n == 1 (nothing crosses a link). The one definition: wire bytes and bus
// bandwidth (micro task, benchmarks) both use it.
double bus_factor(const std::string& op, int n);
// Bytes on the wire per rank for an uncompressed collective of a `bytes` buffer (the
// nccl-tests size: the full buffer of all_gather/reduce_scatter) among n ranks:
// bytes * bus_factor(op, n), rounded down, in integers.
std::uint64_t wire_bytes(const std::string& op, std::uint64_t bytes, int n);
// The bytes t would have in an fp32 run: 4 per element for 16-bit floats, else its own bytes.
// A collective's logical bytes = wire_bytes(op, fp32_bytes(buffer), n): what an uncompressed
// fp32 run puts on the wire, the baseline every compression ratio divides (docs/METRICS.md
// "Compression").
std::uint64_t fp32_bytes(const torch::Tensor& t);

}  // namespace sb::comm
