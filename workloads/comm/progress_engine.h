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
// Another library's transfer (Phase::launch) starts on the caller in every mode (it
// progresses by itself) and completes where the caller waits for it.
// docs/FSDP.md ("Communication progress") has them measured.
//
// Order: the thread runs requests in issue order, a chained collective's phases one after
// another; since every rank issues the same sequence, MPI's matching rule for collectives
// holds. Inline starts a one-phase collective at issue, and the phases of chained ones as the
// previous phase completes, in issue order among chained collectives (Collective::chain_comm;
// a compressor they share is then used in the thread's order too). A synchronous call first
// waits for everything issued before it (inline: for what it conflicts with, see
// Collective::reads, and for every chained phase to have started), then runs on the caller
// with the blocking MPI functions. Time the caller spends blocked (wait(), synchronous calls,
// progress(), and under Inline the codecs run at issue) is "exposed" communication
// (exposed_s()).
#pragma once
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "harness/core/heartbeat.h"

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

// A transfer of a library other than MPI in flight (a Gloo work, an NCCL event): poll(false)
// returns whether it completed; poll(true) waits until it did (NCCL: the compute stream
// waits, the host does not). Both throw the transfer's error.
using Pending = std::function<bool(bool block)>;

// One MPI call of a collective and the local work on either side of it. The engine picks
// the blocking or the non-blocking call and passes the communicator (Collective::comm).
// A phase of another library (backend.h) sets `launch` instead of `blocking` and `start`;
// the engine runs it in the same places and order, and its `after` follows completion.
struct Phase {
  const char* mpi_name = "";   // blocking MPI function, for error messages
  const char* impi_name = "";  // non-blocking one
  // Runs where the phase starts: on the communication thread, or on the caller (Inline),
  // so that compressing into a wire buffer overlaps compute as the transfer does.
  std::function<void()> prepare;
  std::function<int(MPI_Comm)> blocking;
  std::function<int(MPI_Comm, MPI_Request*)> start;
  std::function<void()> after;     // after completion: copy staged output back, decompress
  std::function<void()> after_nb;  // instead of `after` after `start`, when set
  std::function<Pending()> launch;  // another library's transfer: starts it
};

// One collective as the engine runs it: its phases in order (one for a plain collective; a
// compressed all-reduce is a reduce-scatter then an all-gather, each phase's `prepare`
// reading what the previous one's `after` left), and what follows completion.
struct Collective {
  std::vector<Phase> phases;
  // A one-phase collective runs on `comm`. Every phase of a longer one runs on `chain_comm`,
  // which nothing else uses: under Inline a later phase starts only when the previous one is
  // seen complete (in progress() or a wait), a moment that differs between ranks, so MPI's
  // matching rule holds only on a communicator where such phases start in the same order on
  // every rank: those of chained collectives, in issue order (see ProgressEngine).
  MPI_Comm comm = MPI_COMM_NULL, chain_comm = MPI_COMM_NULL;
  // The caller's memory it reads and writes (equal for in-place): under Inline a collective
  // that touches what an outstanding one writes, or writes what one reads, waits for it first
  // (hybrid_shard all-reduces the shard its reduce-scatter writes).
  detail::Span reads, writes;
  // On the completing thread (MPI_Wtime): from the start of the first phase to the end of
  // the last one's `after`.
  std::function<void(double t0, double t1)> done;
  // What the rank's heartbeat names while the caller waits for it (the stall watchdog,
  // harness/core/watchdog.h); the communicator counts it issued (heartbeat::issued).
  sb::heartbeat::Collective label;
};

// Runs c's phases on the calling thread with the blocking MPI calls, without an engine (the
// compressed collectives' blocking API, compressed_collectives.h).
void run_blocking(const Collective& c);

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
  // Inline: tests every outstanding request, completing those that are done and starting
  // the next phase of chained ones (their transfers and codecs run here, on the caller). A
  // no-op when none is outstanding.
  void progress();
  double exposed_s() const { return exposed_s_; }
  void reset_exposed() { exposed_s_ = 0; }

 private:
  friend class Request;
  Request run_now(const Collective& c, bool thread);  // synchronous, on the caller
  Request start_inline(const Collective& c);
  Request enqueue(std::function<void()> fn, const sb::heartbeat::Collective& label);
  // Inline: moves every outstanding request forward without blocking (poll), or until op
  // completed (complete_inline), or until every chained collective started its last phase
  // (start_chains: before a blocking MPI call, so no peer waits for a phase we have yet to
  // start while we wait in MPI for that peer).
  void poll_inline();
  void complete_inline(detail::Op& op);
  void start_chains();
  bool chain_pending() const;  // a chained collective has a phase yet to start
  void advance(detail::Op& op, bool may_start, bool block = false);
  void prune_inline();  // drops completed requests from inline_ops_
  // Inline: completes the outstanding requests that c depends on, so data flows in issue
  // order.
  void complete_conflicting(const Collective& c);
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
