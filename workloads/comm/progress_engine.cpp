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
  std::function<void()> fn;  // thread modes: what the communication thread runs
  std::mutex m;
  std::condition_variable cv;
  std::atomic<bool> done{false};  // set under m; read without it
  std::exception_ptr error;
  // ProgressMode::Inline, moved by the caller's thread: the collective, how many of its
  // phases have started, and the started one's non-blocking request while it is in flight.
  bool on_caller = false;
  Collective c;
  std::size_t started = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  Pending pending;  // instead of req: another library's transfer (Phase::launch)
  double t0 = 0;
  sb::heartbeat::Collective label;  // what the caller waits in (wait(), complete_inline)
  bool in_flight() const { return req != MPI_REQUEST_NULL || pending; }
  bool chained() const { return c.phases.size() > 1; }
  bool all_started() const { return done || started == c.phases.size(); }
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

MPI_Comm comm_of(const Collective& c) { return c.phases.size() > 1 ? c.chain_comm : c.comm; }

void run_after(const Phase& p, bool nb) {
  const auto& f = nb && p.after_nb ? p.after_nb : p.after;
  if (f) f();
}

// Every phase on this thread, one after another: blocking MPI calls, or (poll) non-blocking
// ones completed by polling. t0: when the caller asked for it (the trace event's start).
void run_phases(const Collective& c, bool poll, double t0) {
  const MPI_Comm comm = comm_of(c);
  for (const Phase& p : c.phases) {
    if (p.prepare) p.prepare();
    if (p.launch) {
      p.launch()(/*block=*/true);
      run_after(p, false);
      continue;
    }
    if (poll) {
      MPI_Request r;
      sb::check_mpi(p.start(comm, &r), p.impi_name);
      complete(&r, p.impi_name);
    } else {
      sb::check_mpi(p.blocking(comm), p.mpi_name);
    }
    run_after(p, poll);
  }
  if (c.done) c.done(t0, MPI_Wtime());
}

}  // namespace

void run_blocking(const Collective& c) {
  // Without a communicator (the micro task's compressed collectives) it has no label: the
  // first MPI function names it.
  const bool named = *c.label.op || c.phases.empty();
  sb::heartbeat::Waiting w(named ? c.label : sb::heartbeat::Collective(c.phases[0].mpi_name, "", "mpi", ""));
  run_phases(c, /*poll=*/false, MPI_Wtime());
}

// ---- Request -----------------------------------------------------------------------------
void Request::wait() {
  if (!op_) return;
  if (op_->on_caller) {  // inline: complete it here, on the issuing thread
    auto op = std::move(op_);
    if (!op->done) {
      const double t0 = MPI_Wtime();
      engine_->complete_inline(*op);
      engine_->add_exposed(MPI_Wtime() - t0);
    }
    if (op->error) std::rethrow_exception(op->error);
    return;
  }
  if (!op_->done.load(std::memory_order_acquire)) {
    const double t0 = MPI_Wtime();
    sb::heartbeat::Waiting w(op_->label);
    std::unique_lock<std::mutex> lk(op_->m);
    op_->cv.wait(lk, [&] { return op_->done.load(); });
    if (engine_) engine_->add_exposed(MPI_Wtime() - t0);
  }
  auto op = std::move(op_);
  if (op->error) std::rethrow_exception(op->error);
}

bool Request::test() {
  if (!op_) return true;
  if (op_->on_caller && !op_->done) engine_->poll_inline();
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
  for (auto& op : inline_ops_) complete_inline(*op);  // MPI may still write
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

Request ProgressEngine::enqueue(std::function<void()> fn,
                               const sb::heartbeat::Collective& label) {
  auto op = std::make_shared<detail::Op>();
  op->fn = std::move(fn);
  op->label = label;
  pending_.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard<std::mutex> lk(q_->m);
    q_->ops.push_back(op);
  }
  q_->cv.notify_one();
  return Request(op, this);
}

// A synchronous collective (all_gather(), ...) runs on the caller with the blocking MPI calls
// once nothing earlier can interfere: Open MPI's tuned algorithms, no thread hop, no polling.
// The choice depends only on which API was called and on the progress mode, never on timing,
// so every rank makes the same one (MPI never matches a blocking collective with a
// non-blocking one).
//
// Another library's transfer (Phase::launch: Gloo's worker, NCCL's stream) progresses by
// itself, so in the thread modes it starts on the caller as under Inline, after the thread
// ran everything issued before it (data flows in issue order), and is waited for where the
// caller waits (NCCL: the caller's stream waits, the host does not). An MPI collective queued
// after it first completes the started ones whose memory it touches.
Request ProgressEngine::issue(const Collective& c, bool sync) {
  const bool thread = async_ && mode_ != ProgressMode::Inline;
  if (sync || (!thread && mode_ != ProgressMode::Inline)) return run_now(c, thread);
  if (mode_ == ProgressMode::Inline) return start_inline(c);
  if (c.phases.size() == 1 && c.phases[0].launch) {
    {
      sb::heartbeat::Waiting w(c.label);  // for the queued ones before it
      drain();
    }
    return start_inline(c);
  }
  complete_conflicting(c);
  const bool poll = mode_ == ProgressMode::Poll;
  return enqueue([c, poll] { run_phases(c, poll, MPI_Wtime()); }, c.label);
}

Request ProgressEngine::run_now(const Collective& c, bool thread) {
  auto op = std::make_shared<detail::Op>();
  const double t0 = MPI_Wtime();
  sb::heartbeat::Waiting w(c.label);  // blocked here until it completed
  if (thread) drain();
  start_chains();           // Inline only has chained requests started on the caller
  complete_conflicting(c);  // Inline, and launched transfers in the thread modes
  try {
    run_phases(c, /*poll=*/false, t0);
  } catch (...) {
    op->error = std::current_exception();
  }
  op->done = true;
  add_exposed(MPI_Wtime() - t0);  // the caller was blocked for all of it
  return Request(op, this);
}

// Inline: a one-phase collective starts now; a chained one now when no chained collective
// issued before it still has a phase to start, else from progress() or a wait.
Request ProgressEngine::start_inline(const Collective& c) {
  auto op = std::make_shared<detail::Op>();
  op->on_caller = true;
  op->c = c;
  op->label = c.label;
  op->t0 = MPI_Wtime();
  complete_conflicting(c);
  bool may_start = true;
  if (op->chained())
    for (const auto& o : inline_ops_) may_start = may_start && (!o->chained() || o->all_started());
  prune_inline();  // requests completed by wait() without a progress() since
  inline_ops_.push_back(op);
  advance(*op, may_start);
  add_exposed(MPI_Wtime() - op->t0);  // conflicts waited for, and a prepare run here
  return Request(op, this);
}

// Tests (block: waits for) the phase in flight; once it completed, runs its `after` and,
// when may_start, starts the next phase (prepare, then the non-blocking call), to be tested
// on a later call: as a plain collective's, whose transfer moves from the next progress().
// Errors end the collective; wait() rethrows them.
void ProgressEngine::advance(detail::Op& op, bool may_start, bool block) {
  if (op.done) return;
  try {
    if (op.pending) {
      if (!op.pending(block)) return;
      op.pending = nullptr;
      run_after(op.c.phases[op.started - 1], /*nb=*/false);
    } else if (op.req != MPI_REQUEST_NULL) {
      int flag = 1;
      const Phase& p = op.c.phases[op.started - 1];
      if (block)
        sb::check_mpi(MPI_Wait(&op.req, MPI_STATUS_IGNORE), p.impi_name);
      else
        sb::check_mpi(MPI_Test(&op.req, &flag, MPI_STATUS_IGNORE), p.impi_name);
      if (!flag) return;
      run_after(p, /*nb=*/true);
    }
    if (op.started < op.c.phases.size()) {
      if (!may_start) return;
      const Phase& p = op.c.phases[op.started++];
      if (p.prepare) p.prepare();
      if (p.launch)
        op.pending = p.launch();
      else
        sb::check_mpi(p.start(comm_of(op.c), &op.req), p.impi_name);
      return;
    }
    if (op.c.done) op.c.done(op.t0, MPI_Wtime());
  } catch (...) {
    op.error = std::current_exception();
  }
  op.req = MPI_REQUEST_NULL;
  op.pending = nullptr;
  op.c = Collective();  // drop captured tensors
  op.done = true;
}

void ProgressEngine::poll_inline() {
  bool may_start = true;  // chained collectives start their phases in issue order
  for (auto& op : inline_ops_) {
    if (op->done) continue;
    const bool chained = op->chained();
    advance(*op, !chained || may_start);
    if (chained && !op->all_started()) may_start = false;
  }
}

// While a chained collective has a phase to start, loops over MPI_Test of everything rather
// than MPI_Wait on op alone: op may be that phase, or a peer may be waiting for it. Else op's
// phase in flight is its last and MPI_Wait completes it, as a plain collective always was.
void ProgressEngine::complete_inline(detail::Op& op) {
  if (op.done) return;
  sb::heartbeat::Waiting w(op.label);
  while (!op.done) {
    if (op.in_flight() && !chain_pending())
      advance(op, /*may_start=*/true, /*block=*/true);
    else
      poll_inline();
  }
}

bool ProgressEngine::chain_pending() const {
  for (const auto& op : inline_ops_)
    if (op->chained() && !op->all_started()) return true;
  return false;
}

void ProgressEngine::start_chains() {
  while (chain_pending()) poll_inline();
}

void ProgressEngine::progress() {
  if (inline_ops_.empty()) return;
  const double t0 = MPI_Wtime();
  poll_inline();
  prune_inline();
  add_exposed(MPI_Wtime() - t0);  // transfers and codecs run here, on the compute thread
}

void ProgressEngine::complete_conflicting(const Collective& c) {  // the caller counts the time
  for (auto& op : inline_ops_) {
    if (op->done) continue;
    if (c.reads.overlaps(op->c.writes) || c.writes.overlaps(op->c.writes) ||
        c.writes.overlaps(op->c.reads))
      complete_inline(*op);  // its error, if any, surfaces at its wait()
  }
}

void ProgressEngine::prune_inline() {
  inline_ops_.erase(std::remove_if(inline_ops_.begin(), inline_ops_.end(),
                                   [](const auto& op) { return op->done.load(); }),
                    inline_ops_.end());
}

void ProgressEngine::drain() {
  if (pending_.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lk(q_->m);
  q_->idle.wait(lk, [&] { return pending_.load(std::memory_order_acquire) == 0; });
}

}  // namespace sb::comm
