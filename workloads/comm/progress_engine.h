// How collectives make progress, apart from what they are and which library moves their
// bytes: the Communicator (communicator.h) describes each collective as phases around a
// Transfer its backend made (transfer.h), and a progress engine runs them. It calls a
// transfer's run/start/test/wait and knows no library (the configure step fails if a
// progress_*.cpp names one). Runners, one file each, chosen by the `comm_progress` names
// (register_progress):
//  thread  progress_thread.cpp: a communication thread runs each transfer's blocking call
//          (MPI's tuned algorithms, full bandwidth; the thread spins a core while it waits).
//  poll    progress_thread.cpp: the communication thread starts each transfer and polls it
//          with test() and 20 us sleeps (leaves the core to compute, about half the bandwidth).
//  inline  progress_inline.cpp: the caller starts transfers and no thread is involved; they
//          move when the caller calls progress() (the FSDP engine does at every unit
//          boundary) and complete in wait(). No thread competes with compute for a core.
// Without a communication thread (ProgressOptions::async false: MPI without
// MPI_THREAD_MULTIPLE) the thread runners run every collective blocking on the caller.
// A transfer of a library that progresses by itself (Phase::alone: Gloo's worker, NCCL's
// stream), and every point-to-point transfer (backend.h P2POp), with no codec around it
// starts on the caller in every mode, with or without a thread, and completes where the
// caller waits for it. docs/FSDP.md ("Communication progress") has the modes measured.
//
// Order: the thread runs requests in issue order, a chained collective's phases one after
// another; since every rank issues the same sequence, each library's matching rule holds.
// Inline starts a one-phase collective at issue, and the phases of chained ones as the
// previous phase completes, in issue order among chained collectives, on a channel of their
// own (the Communicator's chain lane, backend.h; a compressor they share is then used in the
// thread's order too). A synchronous call first waits for everything issued before it
// (inline: for what it conflicts with, see Collective::reads, and for every chained phase to
// have started), then runs on the caller with the transfers' blocking calls. Time the caller
// spends blocked (wait(), synchronous calls, progress(), and under inline the codecs run at
// issue) is "exposed" communication (exposed_s()).
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/core/heartbeat.h"
#include "workloads/comm/transfer.h"

namespace sb::comm {

// The runners of this build, for code that picks one in C++ (tests, benchmarks); suites name
// them by `comm_progress`.
enum class ProgressMode { Thread, Poll, Inline };
ProgressMode progress_from_name(const std::string& name);  // a registered runner's name
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

// One transfer of a collective and the local work on either side of it.
struct Phase {
  // Runs where the phase starts (the communication thread, or the caller under inline), so
  // that compressing into a wire buffer overlaps compute as the transfer does.
  std::function<void()> prepare;
  // The transfer, made after prepare (it may name what prepare made) and not yet started.
  std::function<std::shared_ptr<Transfer>()> transfer;
  std::function<void()> after;  // after completion: decompress, reduce
  // Its transfer moves without the caller calling into the library (BackendInfo::alone).
  bool alone = false;
};

// One collective as the engine runs it: its phases in order (one for a plain collective; a
// compressed all-reduce is a reduce-scatter then an all-gather, each phase's `prepare`
// reading what the previous one's `after` left), and what follows completion.
struct Collective {
  const char* name = "";  // all_gather, ...: the trace's name, for messages
  std::vector<Phase> phases;
  // The caller's memory it reads and writes (equal for in-place): a collective that touches
  // what an outstanding one started on the caller writes, or writes what one reads, waits
  // for it first (hybrid_shard all-reduces the shard its reduce-scatter writes).
  detail::Span reads, writes;
  // On the completing thread, in the engine's clock: from the start of the first phase to
  // the end of the last one's `after`.
  std::function<void(double t0, double t1)> done;
  // What the rank's heartbeat names while a thread blocks on it (the stall watchdog,
  // harness/core/watchdog.h); the Communicator counts it issued (heartbeat::issued).
  sb::heartbeat::Collective label;
  bool chained() const { return phases.size() > 1; }
};

using Clock = double (*)();  // seconds

struct ProgressOptions {
  // A communication thread may run transfers beside the caller (the Communicator: MPI was
  // initialised with MPI_THREAD_MULTIPLE).
  bool async = true;
  Clock clock = nullptr;  // of trace times and exposed time (the Communicator's: MPI_Wtime)
};

class ProgressEngine {
 public:
  explicit ProgressEngine(const ProgressOptions& o) : clock_(o.clock) {}
  // Completes what is outstanding. Destroy it while unwinding only after ending every rank
  // (the Communicator aborts first: a peer may be dead, and waiting could hang).
  virtual ~ProgressEngine() = default;
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // sync: the caller wants it complete on return (the transfers' blocking calls, on the
  // caller).
  virtual Request issue(const Collective& c, bool sync) = 0;
  // Moves outstanding requests started on the caller forward without blocking (inline: the
  // next phases of chained ones start here). A no-op when none is outstanding.
  virtual void progress() {}
  double exposed_s() const { return exposed_s_; }
  void reset_exposed() { exposed_s_ = 0; }

 protected:
  friend class Request;
  // Request::wait()/test() of one of this engine's requests, on the caller.
  virtual void wait(detail::Op& op) = 0;
  virtual bool test(detail::Op& op) = 0;
  Request request(std::shared_ptr<detail::Op> op) { return Request(std::move(op), this); }
  // Runs c's phases on the caller, blocking, and returns its completed request; the caller
  // counts it as exposed from t0 on.
  Request run_here(const Collective& c, double t0);
  double now() const { return clock_(); }
  Clock clock() const { return clock_; }
  void add_exposed(double s) { exposed_s_ += s; }

 private:
  Clock clock_;
  double exposed_s_ = 0;
};

// A runner, registered by its file under a `comm_progress` name.
struct ProgressInfo {
  std::string name, doc;
  // It runs transfers on a communication thread; without one (ProgressOptions::async false)
  // it runs every collective blocking on the caller.
  bool needs_thread = false;
  std::function<std::unique_ptr<ProgressEngine>(const ProgressOptions&)> make;
};
void register_progress(ProgressInfo info);  // a duplicate name fails at start-up
// The runner of that name; an unknown name fails listing the known ones.
const ProgressInfo& find_progress(const std::string& name);
// The runners' names, sorted (comm_progress also accepts "auto", which is no runner).
std::vector<std::string> progress_names();

}  // namespace sb::comm
