// The progress engine (progress_engine.h): a communication thread or the caller moves
// collectives forward, in issue order, and times how long the caller was blocked.
#include "workloads/comm/progress_engine.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/workload.h"

namespace sb::comm {

namespace {
struct ProgressInfo {
  ProgressMode mode;
  const char* name;
  const char* doc;
};
constexpr ProgressInfo kProgress[] = {
    {ProgressMode::Thread, "thread", "a communication thread calls the blocking MPI functions"},
    {ProgressMode::Poll, "poll", "a communication thread polls non-blocking calls with sleeps"},
    {ProgressMode::Inline, "inline", "non-blocking calls progressed by the compute thread"},
};
// The name set the `comm_progress` key is checked against (`shardbench keys`).
const sb::Registrar kRegisterProgress([] {
  for (const auto& p : kProgress) sb::register_name("comm_progress", p.name, p.doc);
});
}  // namespace

ProgressMode progress_from_name(const std::string& name) {
  for (const auto& p : kProgress)
    if (name == p.name) return p.mode;
  SB_FAIL("unknown communication progress mode \"{}\"; known: thread, poll, inline", name);
}
const char* progress_name(ProgressMode p) {
  for (const auto& i : kProgress)
    if (i.mode == p) return i.name;
  return "?";
}

namespace detail {
struct Op {
  std::function<void()> fn;
  std::mutex m;
  std::condition_variable cv;
  std::atomic<bool> done{false};  // set under m; read without it
  std::exception_ptr error;
  // ProgressMode::Inline: the non-blocking MPI request, completed on the caller's thread, and
  // what to run once it is (copy back staged output, report the trace event).
  MPI_Request req = MPI_REQUEST_NULL;
  std::function<void()> finish;
  Span reads, writes;  // the caller's memory it reads / writes (Coll::reads, Coll::writes)
};

// Waiters block on condition variables rather than spin: with one rank per core, a spinning
// waiter takes the core from its own communication thread (measured: +75 us per small
// collective with 30 us spins on both sides, +12-17 us without).
}  // namespace detail

struct ProgressEngine::Queue {
  std::mutex m;
  std::condition_variable cv;
  std::condition_variable idle;  // pending_ dropped to 0 (drain())
  std::deque<std::shared_ptr<detail::Op>> ops;
  bool stop = false;
  std::thread thread;
};

namespace {

// Completes a non-blocking MPI call by polling: MPI_Test in a tight loop for the first 50 us
// (a small message finishes well within that), then with 20 us sleeps so a long wait leaves
// the core to the compute threads (Open MPI's shared-memory transport only progresses inside
// MPI calls, so the sleeps trade some bandwidth of overlapped transfers for compute).
void complete(MPI_Request* r, const char* what) {
  int flag = 0;
  const double spin_until = MPI_Wtime() + 50e-6;
  for (;;) {
    sb::check_mpi(MPI_Test(r, &flag, MPI_STATUS_IGNORE), what);
    if (flag) return;
    if (MPI_Wtime() > spin_until) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

}  // namespace

// ---- Request -----------------------------------------------------------------------------
void Request::wait() {
  if (!op_) return;
  if (op_->req != MPI_REQUEST_NULL) {  // inline: complete it here, on the issuing thread
    const double t0 = MPI_Wtime();
    auto op = std::move(op_);
    engine_->finish_inline(*op, /*block=*/true);
    engine_->add_exposed(MPI_Wtime() - t0);
    if (op->error) std::rethrow_exception(op->error);
    return;
  }
  if (!op_->done.load(std::memory_order_acquire)) {
    const double t0 = MPI_Wtime();
    std::unique_lock<std::mutex> lk(op_->m);
    op_->cv.wait(lk, [&] { return op_->done.load(); });
    if (engine_) engine_->add_exposed(MPI_Wtime() - t0);
  }
  auto op = std::move(op_);
  if (op->error) std::rethrow_exception(op->error);
}

bool Request::test() {
  if (!op_) return true;
  if (op_->req != MPI_REQUEST_NULL) engine_->finish_inline(*op_, /*block=*/false);
  return op_->done.load(std::memory_order_acquire);
}

// ---- ProgressEngine ---------------------------------------------------------------------
ProgressEngine::ProgressEngine(bool async) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  async_ = async && provided == MPI_THREAD_MULTIPLE;
  if (async_) {
    q_ = std::make_unique<Queue>();
    q_->thread = std::thread([this] { worker(); });
  }
}

ProgressEngine::~ProgressEngine() {
  // A failure on this rank is unwinding: a peer may be dead or waiting for us, so waiting for
  // our requests (or a thread blocked in one) could hang. Abort every rank instead.
  sb::abort_if_unwinding("the communicator's progress engine");
  for (auto& op : inline_ops_) finish_inline(*op, /*block=*/true);  // MPI may still write
  if (q_) {
    {
      std::lock_guard<std::mutex> lk(q_->m);
      q_->stop = true;
    }
    q_->cv.notify_all();
    q_->thread.join();
  }
}

void ProgressEngine::worker() {
  for (;;) {
    std::shared_ptr<detail::Op> op;
    {
      std::unique_lock<std::mutex> lk(q_->m);
      q_->cv.wait(lk, [&] { return q_->stop || !q_->ops.empty(); });
      if (q_->ops.empty()) return;  // stop requested and nothing left
      op = q_->ops.front();
      q_->ops.pop_front();
    }
    try {
      op->fn();
    } catch (...) {
      op->error = std::current_exception();
    }
    op->fn = nullptr;  // drop captured tensors before waking the waiter
    {
      std::lock_guard<std::mutex> lk(op->m);
      op->done = true;
    }
    op->cv.notify_all();
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(q_->m);  // a drain() may be about to wait
      q_->idle.notify_all();
    }
  }
}

Request ProgressEngine::enqueue(std::function<void()> fn) {
  auto op = std::make_shared<detail::Op>();
  if (!async_ || mode_ == ProgressMode::Inline) {  // on the caller: complete on return, errors
                                                   // surface at wait(); all of it exposed
    const double t0 = MPI_Wtime();
    complete_conflicting(nullptr);  // earlier requests first, as the thread would run them
    try {
      fn();
    } catch (...) {
      op->error = std::current_exception();
    }
    op->done = true;
    add_exposed(MPI_Wtime() - t0);
    return Request(op, this);
  }
  op->fn = std::move(fn);
  pending_.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard<std::mutex> lk(q_->m);
    q_->ops.push_back(op);
  }
  q_->cv.notify_one();
  return Request(op, this);
}

// A synchronous collective (all_gather(), ...) waits until everything the communication
// thread still holds has completed, then runs on the caller with the blocking MPI call: Open
// MPI's tuned algorithms, no thread hop, no polling. The choice depends only on which API was
// called and on the progress mode, never on timing, so every rank makes the same one (MPI
// never matches a blocking collective with a non-blocking one).
Request ProgressEngine::issue(const Collective& c, bool sync) {
  const bool thread = async_ && mode_ != ProgressMode::Inline;
  if (sync || (!thread && mode_ != ProgressMode::Inline)) {
    auto op = std::make_shared<detail::Op>();
    const double t0 = MPI_Wtime();
    if (thread) drain();
    complete_conflicting(&c);
    try {
      sb::check_mpi(c.blocking(), c.mpi_name);
      c.after();
      if (c.done) c.done(t0, MPI_Wtime());
    } catch (...) {
      op->error = std::current_exception();
    }
    op->done = true;
    add_exposed(MPI_Wtime() - t0);  // the caller was blocked for all of it
    return Request(op, this);
  }
  if (mode_ == ProgressMode::Inline) {  // start now; progress() / wait() complete it
    auto op = std::make_shared<detail::Op>();
    const double t0 = MPI_Wtime();
    try {
      complete_conflicting(&c);
      add_exposed(MPI_Wtime() - t0);
      sb::check_mpi(c.start(&op->req), c.impi_name);
    } catch (...) {
      op->error = std::current_exception();
      op->done = true;
      return Request(op, this);
    }
    op->finish = [this, c, t0] {
      (c.after_nb ? c.after_nb : c.after)();
      if (c.done) c.done(t0, MPI_Wtime());
    };
    op->reads = c.reads, op->writes = c.writes;
    prune_inline();  // requests completed by wait() without a progress() since
    inline_ops_.push_back(op);
    return Request(op, this);
  }
  const bool blocking = mode_ == ProgressMode::Thread;
  return enqueue([this, c, blocking] {
    const double t0 = MPI_Wtime();
    if (blocking) {
      sb::check_mpi(c.blocking(), c.mpi_name);
    } else {
      MPI_Request r;
      sb::check_mpi(c.start(&r), c.impi_name);
      complete(&r, c.impi_name);
    }
    (blocking || !c.after_nb ? c.after : c.after_nb)();
    if (c.done) c.done(t0, MPI_Wtime());
  });
}

// Completes (block) or tests one inline request; on completion runs its finish and marks it
// done. Errors are stored in the op (wait() rethrows them).
void ProgressEngine::finish_inline(detail::Op& op, bool block) {
  if (op.req == MPI_REQUEST_NULL) return;
  int flag = 0;
  const int rc = block ? MPI_Wait(&op.req, MPI_STATUS_IGNORE)
                       : MPI_Test(&op.req, &flag, MPI_STATUS_IGNORE);
  if (rc != MPI_SUCCESS) {
    op.req = MPI_REQUEST_NULL;
    try {
      sb::check_mpi(rc, block ? "MPI_Wait" : "MPI_Test");
    } catch (...) {
      op.error = std::current_exception();
    }
    op.done = true;
    return;
  }
  if (!block && !flag) return;
  op.req = MPI_REQUEST_NULL;
  try {
    if (op.finish) op.finish();
  } catch (...) {
    op.error = std::current_exception();
  }
  op.finish = nullptr;
  op.done = true;
}

void ProgressEngine::progress() {
  if (inline_ops_.empty()) return;
  const double t0 = MPI_Wtime();
  for (auto& op : inline_ops_) finish_inline(*op, /*block=*/false);
  prune_inline();
  add_exposed(MPI_Wtime() - t0);  // transfers run here, on the compute thread
}

void ProgressEngine::complete_conflicting(const Collective* c) {  // the caller counts the time
  for (auto& op : inline_ops_) {
    if (op->req == MPI_REQUEST_NULL) continue;
    if (!c || c->reads.overlaps(op->writes) || c->writes.overlaps(op->writes) ||
        c->writes.overlaps(op->reads))
      finish_inline(*op, /*block=*/true);  // its error, if any, surfaces at its wait()
  }
}

void ProgressEngine::prune_inline() {
  inline_ops_.erase(std::remove_if(inline_ops_.begin(), inline_ops_.end(),
                                   [](const auto& op) { return op->req == MPI_REQUEST_NULL; }),
                    inline_ops_.end());
}

void ProgressEngine::drain() {
  if (pending_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lk(q_->m);
  q_->idle.wait(lk, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

Request ProgressEngine::submit(std::function<void()> fn) { return enqueue(std::move(fn)); }

}  // namespace sb::comm
