// What the progress runners (progress_thread.cpp, progress_inline.cpp) share: a request's
// state and the steps that move a collective's phases. Internal to the progress engine.
#pragma once
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

#include "workloads/comm/progress_engine.h"

namespace sb::comm::detail {

struct Op {
  Collective c;
  // c.label, kept: c is dropped on completion (on the communication thread, while the caller
  // may be entering wait()), the label is what that wait names.
  sb::heartbeat::Collective label;
  double t0 = 0;                  // when the caller asked for it (the trace event's start)
  std::atomic<bool> done{false};  // set under m when another thread completes it
  std::exception_ptr error;
  // Run on the communication thread: the thread sets done under m and notifies. Waiters
  // block on the condition variable rather than spin: with one rank per core, a spinning
  // waiter takes the core from its own communication thread (measured: +75 us per small
  // collective with 30 us spins on both sides, +12-17 us without).
  std::mutex m;
  std::condition_variable cv;
  // Moved by the caller's thread (inline, and transfers that progress alone): how many
  // phases have started, and the started one's transfer while it is in flight.
  bool on_caller = false;
  std::size_t started = 0;
  std::shared_ptr<Transfer> in_flight;
  bool all_started() const { return done || started == c.phases.size(); }
};

// The one call site of each Transfer call: whatever watches the collective in flight (its
// name is c.name) hooks in here. The blocking ones (run, wait) and poll's loop of tests are
// heartbeat waits in c.label (harness/core/heartbeat.h), on whichever thread calls them.
void run_transfer(Transfer& t, const Collective& c);
void start_transfer(Transfer& t, const Collective& c);
bool test_transfer(Transfer& t, const Collective& c);
void wait_transfer(Transfer& t, const Collective& c);

// Every phase of c on this thread, one after another: each transfer's blocking call, or
// (poll) started and tested until complete, with sleeps once a short spin has passed. Then
// c.done(t0, clock()).
void run_phases(const Collective& c, bool poll, double t0, Clock clock);

// On the caller: tests (block: waits for) op's transfer in flight; once it completed, runs
// its phase's `after` and, when may_start, starts the next phase (prepare, then the
// transfer's start()), to be tested on a later call. After the last phase: c.done, then op
// is done. Errors end the collective; wait() rethrows them.
void advance(Op& op, bool may_start, bool block, Clock clock);

// Whether c must wait for op: it reads what op writes, or writes what op reads or writes.
bool conflicts(const Collective& c, const Op& op);

}  // namespace sb::comm::detail
