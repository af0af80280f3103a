// The thread runners (comm_progress = "thread" and "poll", progress_engine.h): a
// communication thread runs requests in issue order, each transfer blocking (thread) or
// started and polled (poll), while the caller computes.
#include <algorithm>
#include <deque>
#include <thread>

#include "harness/workload.h"
#include "workloads/comm/progress_runner.h"

namespace sb::comm {
namespace {

using detail::Op;

class ThreadRunner final : public ProgressEngine {
 public:
  ThreadRunner(const ProgressOptions& o, bool poll) : ProgressEngine(o), poll_(poll), async_(o.async) {
    if (async_) thread_ = std::thread([this] { worker(); });
  }
  ~ThreadRunner() override {
    for (auto& op : on_caller_) wait_on_caller(*op);  // a library may still write into them
    if (!async_) return;
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // A synchronous collective runs on the caller with the blocking calls once nothing earlier
  // can interfere: no thread hop, no polling. The choice depends only on which API was
  // called, never on timing, so every rank makes the same one (MPI never matches a blocking
  // collective with a non-blocking one).
  //
  // A one-phase collective without codecs whose transfer progresses by itself (Gloo's
  // worker, NCCL's stream) starts on the caller, after the thread ran everything issued
  // before it (data flows in issue order), and is waited for where the caller waits (NCCL:
  // the caller's stream waits, the host does not). A collective queued after it first
  // completes the started ones whose memory it touches.
  Request issue(const Collective& c, bool sync) override {
    const double t0 = now();
    // Also without a thread: a point-to-point receive run blocking at issue could never see
    // its peer's send, posted after that peer's own receive.
    if (!sync && starts_on_caller(c)) {
      prune();
      drain();
      return start_on_caller(c);
    }
    if (sync || !async_) {
      drain();
      complete_conflicting(c);
      return run_here(c, t0);
    }
    prune();
    complete_conflicting(c);
    return enqueue(c);
  }

 protected:
  void wait(Op& op) override {
    if (op.done.load(std::memory_order_acquire)) return;
    const double t0 = now();
    if (op.on_caller) {
      wait_on_caller(op);
    } else {
      sb::heartbeat::Waiting w(op.label);  // the thread may be in prepare, not in a transfer
      std::unique_lock<std::mutex> lk(op.m);
      op.cv.wait(lk, [&] { return op.done.load(); });
    }
    add_exposed(now() - t0);
  }
  bool test(Op& op) override {
    if (op.on_caller && !op.done) detail::advance(op, true, /*block=*/false, clock());
    return op.done.load(std::memory_order_acquire);
  }

 private:
  static bool starts_on_caller(const Collective& c) {
    if (c.chained()) return false;
    const Phase& p = c.phases[0];
    return p.alone && !p.prepare && !p.after;
  }

  Request start_on_caller(const Collective& c) {
    auto op = std::make_shared<Op>();
    op->on_caller = true;
    op->c = c;
    op->label = c.label;
    op->t0 = now();
    complete_conflicting(c);
    on_caller_.push_back(op);
    detail::advance(*op, /*may_start=*/true, /*block=*/false, clock());
    add_exposed(now() - op->t0);  // conflicts waited for
    return request(std::move(op));
  }

  void wait_on_caller(Op& op) {
    while (!op.done) detail::advance(op, /*may_start=*/true, /*block=*/true, clock());
  }

  void complete_conflicting(const Collective& c) {  // the caller counts the time
    for (auto& op : on_caller_)
      if (!op->done && detail::conflicts(c, *op)) wait_on_caller(*op);  // its error: at its wait()
  }

  void prune() {
    on_caller_.erase(std::remove_if(on_caller_.begin(), on_caller_.end(),
                                    [](const auto& op) { return op->done.load(); }),
                     on_caller_.end());
  }

  Request enqueue(const Collective& c) {
    auto op = std::make_shared<Op>();
    op->c = c;
    op->label = c.label;
    pending_.fetch_add(1, std::memory_order_acq_rel);
    {
      std::lock_guard<std::mutex> lk(m_);
      queue_.push_back(op);
    }
    cv_.notify_one();
    return request(std::move(op));
  }

  void worker() {
    for (;;) {
      std::shared_ptr<Op> op;
      {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop requested and nothing left
        op = queue_.front();
        queue_.pop_front();
      }
      try {
        detail::run_phases(op->c, poll_, now(), clock());  // t0: when the thread starts it
      } catch (...) {
        op->error = std::current_exception();
      }
      op->c = Collective();  // drop captured tensors before waking the waiter
      {
        std::lock_guard<std::mutex> lk(op->m);
        op->done = true;
      }
      op->cv.notify_all();
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lk(m_);  // a drain() may be about to wait
        idle_.notify_all();
      }
    }
  }

  // Waits until nothing is queued or running on the communication thread.
  void drain() {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    std::unique_lock<std::mutex> lk(m_);
    idle_.wait(lk, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }

  const bool poll_, async_;
  std::vector<std::shared_ptr<Op>> on_caller_;  // started on the caller, outstanding
  std::mutex m_;
  std::condition_variable cv_, idle_;  // idle_: pending_ dropped to 0 (drain())
  std::deque<std::shared_ptr<Op>> queue_;
  std::atomic<int> pending_{0};  // queued or running on the communication thread
  bool stop_ = false;
  std::thread thread_;  // last: started when everything above exists
};

const sb::Registrar kRegister([] {
  register_progress({"thread", "a communication thread runs each transfer's blocking call", true,
                     [](const ProgressOptions& o) { return std::make_unique<ThreadRunner>(o, false); }});
  register_progress({"poll", "a communication thread starts transfers and polls them with sleeps",
                     true,
                     [](const ProgressOptions& o) { return std::make_unique<ThreadRunner>(o, true); }});
});

}  // namespace
}  // namespace sb::comm
