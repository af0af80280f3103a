// The progress engine's interface (progress_engine.h): the runner registry, requests, and
// the steps every runner takes to move a collective (progress_runner.h).
#include "workloads/comm/progress_runner.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb::comm {

// ---- registry ----------------------------------------------------------------------------
namespace {
std::vector<ProgressInfo>& registry() {
  static std::vector<ProgressInfo> r;
  return r;
}

// The C++ spelling of each runner (ProgressMode); the names are the runners' registrations.
struct ModeName {
  ProgressMode mode;
  const char* name;
};
constexpr ModeName kModeNames[] = {
    {ProgressMode::Thread, "thread"}, {ProgressMode::Poll, "poll"}, {ProgressMode::Inline, "inline"}};
}  // namespace

void register_progress(ProgressInfo info) {
  for (const auto& i : registry())
    SB_CHECK(i.name != info.name, "progress runner \"{}\" registered twice", info.name);
  sb::register_name("comm_progress", info.name, info.doc);
  registry().push_back(std::move(info));
}

std::vector<std::string> progress_names() {
  std::vector<std::string> v;
  for (const auto& i : registry()) v.push_back(i.name);
  std::sort(v.begin(), v.end());  // registration order is static-init order
  return v;
}

const ProgressInfo& find_progress(const std::string& name) {
  for (const auto& i : registry())
    if (i.name == name) return i;
  SB_FAIL("unknown communication progress mode \"{}\"; known: {}", name,
          fmt::join(progress_names(), ", "));
}

ProgressMode progress_from_name(const std::string& name) {
  find_progress(name);  // unknown: the error lists the registered runners
  for (const auto& m : kModeNames)
    if (name == m.name) return m.mode;
  SB_FAIL("progress runner \"{}\" has no ProgressMode; choose it by name "
          "(Communicator::set_progress(\"{}\"))", name, name);
}

const char* progress_name(ProgressMode p) {
  for (const auto& m : kModeNames)
    if (m.mode == p) return m.name;
  return "?";
}

// ---- Request -----------------------------------------------------------------------------
void Request::wait() {
  if (!op_) return;
  auto op = std::move(op_);
  engine_->wait(*op);
  if (op->error) std::rethrow_exception(op->error);
}

bool Request::test() {
  if (!op_) return true;
  return engine_->test(*op_);
}

Request ProgressEngine::run_here(const Collective& c, double t0) {
  auto op = std::make_shared<detail::Op>();
  try {
    detail::run_phases(c, /*poll=*/false, t0, clock_);
  } catch (...) {
    op->error = std::current_exception();
  }
  op->done = true;
  add_exposed(now() - t0);  // the caller was blocked for all of it
  return request(std::move(op));
}

// ---- the steps ---------------------------------------------------------------------------
namespace detail {

void run_transfer(Transfer& t, const Collective& c) {
  sb::heartbeat::Waiting w(c.label);
  t.run();
}
void start_transfer(Transfer& t, const Collective&) { t.start(); }
bool test_transfer(Transfer& t, const Collective&) { return t.test(); }
void wait_transfer(Transfer& t, const Collective& c) {
  sb::heartbeat::Waiting w(c.label);
  t.wait();
}

namespace {
// Completes a started transfer by polling: test() in a tight loop for the first 50 us (a
// small message finishes well within that), then with 20 us sleeps so a long wait leaves the
// core to the compute threads (Open MPI's shared-memory transport only progresses inside its
// calls, so the sleeps trade some bandwidth of overlapped transfers for compute).
void poll_until_done(Transfer& t, const Collective& c, Clock clock) {
  sb::heartbeat::Waiting w(c.label);
  const double spin_until = clock() + 50e-6;
  while (!test_transfer(t, c))
    if (clock() > spin_until) std::this_thread::sleep_for(std::chrono::microseconds(20));
}
}  // namespace

void run_phases(const Collective& c, bool poll, double t0, Clock clock) {
  for (const Phase& p : c.phases) {
    if (p.prepare) p.prepare();
    const std::shared_ptr<Transfer> t = p.transfer();
    if (poll) {
      start_transfer(*t, c);
      poll_until_done(*t, c, clock);
    } else {
      run_transfer(*t, c);
    }
    if (p.after) p.after();
  }
  if (c.done) c.done(t0, clock());
}

void advance(Op& op, bool may_start, bool block, Clock clock) {
  if (op.done) return;
  try {
    if (op.in_flight) {
      if (block)
        wait_transfer(*op.in_flight, op.c);
      else if (!test_transfer(*op.in_flight, op.c))
        return;
      op.in_flight = nullptr;
      const Phase& p = op.c.phases[op.started - 1];
      if (p.after) p.after();
    }
    if (op.started < op.c.phases.size()) {
      if (!may_start) return;
      const Phase& p = op.c.phases[op.started++];
      if (p.prepare) p.prepare();
      op.in_flight = p.transfer();
      start_transfer(*op.in_flight, op.c);
      return;
    }
    if (op.c.done) op.c.done(op.t0, clock());
  } catch (...) {
    op.error = std::current_exception();
  }
  op.in_flight = nullptr;
  op.c = Collective();  // drop captured tensors
  op.done = true;
}

bool conflicts(const Collective& c, const Op& op) {
  return c.reads.overlaps(op.c.writes) || c.writes.overlaps(op.c.writes) ||
         c.writes.overlaps(op.c.reads);
}

}  // namespace detail
}  // namespace sb::comm
