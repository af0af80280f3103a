// The inline runner (comm_progress = "inline", progress_engine.h): the caller starts
// transfers and moves them in progress() and wait(); no thread.
#include <algorithm>

#include "harness/workload.h"
#include "workloads/comm/progress_runner.h"

namespace sb::comm {
namespace {

using detail::Op;

class InlineRunner final : public ProgressEngine {
 public:
  using ProgressEngine::ProgressEngine;
  ~InlineRunner() override {
    for (auto& op : ops_) complete(*op);  // a library may still write into their buffers
  }

  // A synchronous collective runs blocking on the caller once nothing earlier can interfere:
  // every chained phase started (no peer waits for a phase we have yet to start while we
  // block for that peer), and the requests it conflicts with complete.
  Request issue(const Collective& c, bool sync) override {
    const double t0 = now();
    if (sync) {
      start_chains();
      complete_conflicting(c);
      return run_here(c, t0);
    }
    return start(c, t0);
  }

  // Tests every outstanding request, completing those that are done and starting the next
  // phase of chained ones (their transfers and codecs run here, on the caller).
  void progress() override {
    if (ops_.empty()) return;
    const double t0 = now();
    poll();
    prune();
    add_exposed(now() - t0);  // transfers and codecs run here, on the compute thread
  }

 protected:
  void wait(Op& op) override {
    if (op.done) return;
    const double t0 = now();
    complete(op);
    add_exposed(now() - t0);
  }
  bool test(Op& op) override {
    if (!op.done) poll();
    return op.done;
  }

 private:
  // A one-phase collective starts now; a chained one now when no chained collective issued
  // before it still has a phase to start, else from progress() or a wait.
  Request start(const Collective& c, double t0) {
    auto op = std::make_shared<Op>();
    op->on_caller = true;
    op->c = c;
    op->label = c.label;
    op->t0 = t0;
    complete_conflicting(c);
    bool may_start = true;
    if (c.chained())
      for (const auto& o : ops_) may_start = may_start && (!o->c.chained() || o->all_started());
    prune();  // requests completed by wait() without a progress() since
    ops_.push_back(op);
    detail::advance(*op, may_start, /*block=*/false, clock());
    add_exposed(now() - t0);  // conflicts waited for, and a prepare run here
    return request(std::move(op));
  }

  // Moves every outstanding request forward without blocking; chained collectives start
  // their phases in issue order.
  void poll() {
    bool may_start = true;
    for (auto& op : ops_) {
      if (op->done) continue;
      const bool chained = op->c.chained();
      detail::advance(*op, !chained || may_start, /*block=*/false, clock());
      if (chained && !op->all_started()) may_start = false;
    }
  }

  // While a chained collective has a phase to start, polls everything rather than waiting
  // on op alone: op may be that phase, or a peer may be waiting for it. Else op's phase in
  // flight is its last and waiting completes it, as a plain collective always was.
  void complete(Op& op) {
    if (op.done) return;
    sb::heartbeat::Waiting w(op.label);  // polling chained phases between blocking waits
    while (!op.done) {
      if (op.in_flight && !chain_pending())
        detail::advance(op, /*may_start=*/true, /*block=*/true, clock());
      else
        poll();
    }
  }

  bool chain_pending() const {
    for (const auto& op : ops_)
      if (op->c.chained() && !op->all_started()) return true;
    return false;
  }

  void start_chains() {
    while (chain_pending()) poll();
  }

  // Completes the outstanding requests that c depends on, so data flows in issue order (the
  // caller counts the time).
  void complete_conflicting(const Collective& c) {
    for (auto& op : ops_)
      if (!op->done && detail::conflicts(c, *op)) complete(*op);  // its error: at its wait()
  }

  void prune() {
    ops_.erase(std::remove_if(ops_.begin(), ops_.end(), [](const auto& op) { return op->done.load(); }),
               ops_.end());
  }

  std::vector<std::shared_ptr<Op>> ops_;  // outstanding, in issue order
};

const sb::Registrar kRegister([] {
  register_progress({"inline", "non-blocking transfers progressed by the compute thread", false,
                     [](const ProgressOptions& o) { return std::make_unique<InlineRunner>(o); }});
});

}  // namespace
}  // namespace sb::comm
