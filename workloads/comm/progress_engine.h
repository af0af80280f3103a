// How collectives make progress, apart from what they are (communicator.h describes each
// collective; this engine runs the descriptions). Modes, the same on every rank:
//  Thread: a communication thread calls the blocking MPI function (tuned algorithms, full
//          bandwidth; the thread spins a core while it waits for peers).
//  Poll:   the communication thread calls the non-blocking one and polls it with MPI_Test
//          and 20 us sleeps (leaves the core to compute, about half the bandwidth).
//  Inline: the caller starts the non-blocking call and no thread is involved; it moves when
//          the caller calls progress() (the FSDP engine does at every unit boundary) and
//          completes in wait(). No thread competes with compute for a core.
// Without MPI_THREAD_MULTIPLE (async false) every collective runs blocking on the caller.
// docs/FSDP.md ("Communication progress") has them measured.
//
// Order: the thread runs requests in issue order; since every rank issues the same sequence,
// MPI's matching rule for collectives holds. A synchronous call first waits for everything
// issued before it (inline: for what it conflicts with, see Collective::reads), then runs on
// the caller with the blocking MPI function. Time the caller spends blocked (wait(),
// synchronous calls, progress()) is "exposed" communication (exposed_s()).
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

namespace sb::comm {

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
}  // namespace detail
class ProgressEngine;

// A collective in flight. wait() blocks until it completed (rethrowing its error);
// test() returns whether it completed without blocking. A default Request is complete.
class Request {
 public:
  Request() = default;
  void wait();
  bool test();

 private:
  friend class ProgressEngine;
  Request(std::shared_ptr<detail::Op> op, ProgressEngine* e) : op_(std::move(op)), engine_(e) {}
  std::shared_ptr<detail::Op> op_;
  ProgressEngine* engine_ = nullptr;
};

// One collective as the engine runs it: its blocking MPI call, its non-blocking one, and
// what follows completion. The engine picks which call runs, where and when.
struct Collective {
  const char* mpi_name = "";   // blocking MPI function, for error messages
  const char* impi_name = "";  // non-blocking one
  std::function<int()> blocking;
  std::function<int(MPI_Request*)> start;
  std::function<void()> after;     // after completion: copy staged output back
  std::function<void()> after_nb;  // instead of `after` after `start`, when set
  // The caller's memory it reads and writes (equal for in-place): under Inline a collective
  // that touches what an outstanding one writes, or writes what one reads, waits for it first
  // (hybrid_shard all-reduces the shard its reduce-scatter writes).
  detail::Span reads, writes;
  std::function<void(double t0, double t1)> done;  // on the completing thread (MPI_Wtime)
};

class ProgressEngine {
 public:
  explicit ProgressEngine(bool async);  // async: a communication thread, when MPI allows it
  ~ProgressEngine();  // completes what is outstanding; aborts instead while unwinding
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  bool async() const { return async_; }
  void set_mode(ProgressMode m) { mode_ = m; }  // before the first request
  ProgressMode mode() const { return mode_; }
  // sync: the caller wants it complete on return (blocking MPI on the caller).
  Request issue(const Collective& c, bool sync);
  // Runs fn where the thread would run a collective, in issue order (compound operations).
  Request submit(std::function<void()> fn);
  // Inline: tests every outstanding request, completing those that are done (their transfers
  // run here, on the caller). A no-op when none is outstanding.
  void progress();
  double exposed_s() const { return exposed_s_; }
  void reset_exposed() { exposed_s_ = 0; }

 private:
  friend class Request;
  Request enqueue(std::function<void()> fn);
  void finish_inline(detail::Op& op, bool block);
  void prune_inline();  // drops completed requests from inline_ops_
  // Inline: completes the outstanding requests that c depends on (all of them when c is
  // null: a submitted function may touch anything), so data flows in issue order.
  void complete_conflicting(const Collective* c);
  void drain();  // waits until nothing is queued or running on the communication thread
  void worker();
  void add_exposed(double s) { exposed_s_ += s; }

  bool async_ = true;
  ProgressMode mode_ = ProgressMode::Thread;
  std::vector<std::shared_ptr<detail::Op>> inline_ops_;  // Inline, outstanding
  double exposed_s_ = 0;
  std::atomic<int> pending_{0};  // queued or running on the communication thread
  struct Queue;
  std::unique_ptr<Queue> q_;
};

}  // namespace sb::comm
