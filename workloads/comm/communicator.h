// Tensor collectives over MPI for the FSDP engine: all-gather, reduce-scatter, all-reduce,
// broadcast, all-to-all, blocking and non-blocking, on the world, shard and replica groups.
//
// Overlap: Open MPI has no asynchronous progress thread on shared memory, so non-blocking
// collectives run on one communication thread per Communicator (needs MPI_THREAD_MULTIPLE;
// with less, every collective runs inline on the caller and requests are complete on return).
// The thread executes collectives in the order they were issued; since every rank issues
// the same sequence, MPI's matching rule for collectives holds. How requests progress (on
// that thread, or inline on the caller) is set_progress()'s choice.
// A blocking call (all_gather(), ...) first waits for everything issued before it (inline
// progress: for what it conflicts with, see Coll::reads), then runs on the caller with the
// blocking MPI function: Open MPI's tuned algorithms, no thread hop.
//
// Time the caller spends blocked (wait(), blocking calls, progress()) is "exposed"
// communication (exposed_s()). Every collective reports one sb::CommEvent to the trace hook
// (on the thread that completes it, before its request completes).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>
#include <torch/types.h>

#include "harness/trace/records.h"

namespace sb::comm {

// world: all ranks; shard: ranks that shard parameters among themselves (contiguous blocks of
// shard_group ranks, one emulated "node"); replica: ranks with the same shard rank.
enum class Group { World, Shard, Replica };
const char* group_name(Group g);

enum class ReduceOp { Sum, Max, Min };

enum class ProgressMode { Thread, Poll, Inline };
ProgressMode progress_from_name(const std::string& name);  // "thread", "poll", "inline"
const char* progress_name(ProgressMode p);

namespace detail {
struct Op;
struct Span {  // bytes [p, p + n) of a buffer
  const char* p = nullptr;
  std::size_t n = 0;
  bool overlaps(const Span& o) const { return n && o.n && p < o.p + o.n && o.p < p + n; }
};
}
class Communicator;

// A collective in flight. wait() blocks until it completed (rethrowing its error);
// test() returns whether it completed without blocking. A default Request is complete.
class Request {
 public:
  Request() = default;
  void wait();
  bool test();

 private:
  friend class Communicator;
  Request(std::shared_ptr<detail::Op> op, Communicator* c) : op_(std::move(op)), comm_(c) {}
  std::shared_ptr<detail::Op> op_;
  Communicator* comm_ = nullptr;
};

using TraceHook = std::function<void(const sb::CommEvent&)>;

class Communicator {
 public:
  // world is duplicated (our traffic never matches the caller's). shard_group: ranks per
  // shard group; 0 = ranks per node (MPI_COMM_TYPE_SHARED). It must divide the world size.
  // async=false runs every collective inline (no thread).
  explicit Communicator(MPI_Comm world, int shard_group = 0, bool async = true);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank(Group g = Group::World) const;
  int size(Group g = Group::World) const;
  MPI_Comm mpi(Group g) const;
  bool async() const { return async_; }
  // How requests (..._async) progress; the same on every rank, set before the first one.
  //  Thread: the communication thread calls the blocking MPI function (tuned algorithms, full
  //          bandwidth; the thread spins a core while it waits for peers).
  //  Poll:   the communication thread calls the non-blocking one and polls it with MPI_Test
  //          and 20 us sleeps (leaves the core to compute, about half the bandwidth).
  //  Inline: the caller starts the non-blocking call and no thread is involved; it moves
  //          when the caller calls progress() (the FSDP engine does at every unit boundary)
  //          and completes in wait(). No thread competes with compute for a core.
  // docs/FSDP.md ("Communication progress") has them measured.
  void set_progress(ProgressMode p) { progress_ = p; }
  ProgressMode progress_mode() const { return progress_; }
  // ProgressMode::Inline: tests every outstanding request, completing those that are done (their
  // transfers run here, on the caller). A no-op when none is outstanding.
  void progress();

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
  // A scalar all-reduce (loss, norms) on the calling thread's queue position.
  double all_reduce_scalar(double v, Group g, ReduceOp op = ReduceOp::Sum);
  // Runs fn on the communication thread in issue order (compound collectives, e.g. a
  // reduce-scatter followed by a replica all-reduce, and compressed collectives).
  Request submit(std::function<void()> fn);

  // Trace: hook gets every event; times are seconds since origin; step labels events.
  void set_trace_hook(TraceHook hook, double origin_wtime);
  void set_step(std::int64_t step) { step_ = step; }
  // Reports one event (used by compound operations run through submit()).
  void report(const char* op, Group g, const std::string& kind, std::uint64_t logical_bytes,
              std::uint64_t wire_bytes, double t0, double t1);

  // Seconds the caller spent blocked in Request::wait() since the last reset.
  double exposed_s() const { return exposed_s_; }
  void reset_exposed() { exposed_s_ = 0; }

  // Whether MPI can read device memory directly (MPIX_Query_cuda_support); else collectives
  // on device tensors are staged through host memory.
  bool cuda_aware() const { return cuda_aware_; }

 private:
  friend class Request;
  Request enqueue(std::function<void()> fn);
  using Span = detail::Span;
  static Span span(const torch::Tensor& t) {
    return {static_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes())};
  }
  struct Coll {  // one collective, described once; issue() decides how it runs
    const char* op;         // trace name: all_gather, ...
    const char* mpi_name;   // blocking MPI function, for error messages
    const char* impi_name;  // non-blocking one
    Group g;
    std::string kind;
    std::function<int()> blocking;
    std::function<int(MPI_Request*)> start;
    std::function<void()> after;  // after completion: copy staged output back
    std::function<void()> after_nb;  // instead of `after` after `start`, when set
    std::uint64_t logical = 0, wire = 0;
    // The caller's memory it reads and writes (equal for in-place): with ProgressMode::Inline a
    // collective that touches what an outstanding one writes, or writes what one reads,
    // waits for it first (hybrid_shard all-reduces the shard its reduce-scatter writes).
    Span reads, writes;
  };
  Request issue(const Coll& c, bool sync);
  void finish_inline(detail::Op& op, bool block);
  void prune_inline();  // drops completed requests from inline_ops_
  // ProgressMode::Inline: completes the outstanding requests that c depends on (all of them when
  // c is null: a submitted function may touch anything), so data flows in issue order.
  void complete_conflicting(const Coll* c);
  void drain();  // waits until nothing is queued or running on the communication thread
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
  void worker();
  void add_exposed(double s) { exposed_s_ += s; }

  MPI_Comm world_ = MPI_COMM_NULL, shard_ = MPI_COMM_NULL, replica_ = MPI_COMM_NULL;
  int rank_[3] = {0, 0, 0}, size_[3] = {1, 1, 1};
  bool async_ = true, cuda_aware_ = false;
  ProgressMode progress_ = ProgressMode::Thread;
  std::vector<std::shared_ptr<detail::Op>> inline_ops_;  // ProgressMode::Inline, outstanding
  double exposed_s_ = 0;
  std::atomic<int> pending_{0};  // queued or running on the communication thread
  std::int64_t step_ = 0;
  TraceHook hook_;
  double origin_ = 0;
  struct Queue;
  std::unique_ptr<Queue> q_;
};

// The nccl-tests bus factor of a collective among n ranks (docs/METRICS.md): all_gather /
// reduce_scatter / all_to_all (n-1)/n, all_reduce 2(n-1)/n, broadcast 1; 0 for every
// operation when n == 1 (nothing crosses a link). The one definition: wire bytes and bus
// bandwidth (micro task, benchmarks) both use it.
double bus_factor(const std::string& op, int n);
// Bytes on the wire per rank for an uncompressed collective of `logical_bytes` among n ranks:
// logical_bytes * bus_factor(op, n), rounded down.
std::uint64_t wire_bytes(const std::string& op, std::uint64_t logical_bytes, int n);

}  // namespace sb::comm
