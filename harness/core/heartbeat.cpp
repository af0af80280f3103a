// The rank's progress state behind heartbeat.h. One mutex guards it: every update is a few
// stores (tens of nanoseconds, against microseconds for the smallest collective), and the
// heartbeat thread takes it once per beat.
#include "harness/core/heartbeat.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include <fmt/format.h>

namespace sb::heartbeat {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr std::size_t kStepWindow = 1024;  // step intervals the median is taken over
constexpr int kWaitSlots = 16;

void copy_truncated(char* out, std::size_t cap, const std::string& in) {
  const std::size_t n = std::min(in.size(), cap - 1);
  std::memcpy(out, in.data(), n);
  out[n] = '\0';
}

struct State {
  std::mutex m;
  std::int64_t step = -1;
  const char* phase = "start";
  std::uint64_t progress = 0;
  Clock::time_point progressed = Clock::now();
  std::uint64_t issued = 0;
  Collective last_issued;
  // The Waiting scopes alive, on any thread: a few at most (the caller and the
  // communication thread, a level or two of nesting each).
  struct Wait {
    bool alive = false;
    Collective in;
    Clock::time_point since;
  };
  Wait waits[kWaitSlots];
  Clock::time_point step_started;
  std::vector<double> intervals;  // ring of the last kStepWindow step intervals
  std::size_t next_interval = 0;

  void progressed_now() {  // under m
    ++progress;
    progressed = Clock::now();
  }
};

State& state() {
  static State s;
  return s;
}

}  // namespace

Collective::Collective(const char* op_, const char* group_, const std::string& backend_,
                       const std::string& kind_)
    : op(op_), group(group_) {
  copy_truncated(backend, sizeof(backend), backend_);
  copy_truncated(kind, sizeof(kind), kind_);
}

std::string Collective::describe() const {
  if (!*op) return "an unnamed collective";
  std::string s = fmt::format("{} #{}", op, seq);
  if (*kind || *group)
    s += fmt::format(" ({}{}{})", kind, *kind && *group ? ", " : "",
                     *group ? fmt::format("{} group", group) : "");
  if (*backend) s += fmt::format(" on {}", backend);
  return s;
}

void set_step(std::int64_t step) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.m);
  if (step == s.step) return;
  const Clock::time_point now = Clock::now();
  if (s.step >= 0) {
    const double dt = std::chrono::duration<double>(now - s.step_started).count();
    if (s.intervals.size() < kStepWindow)
      s.intervals.push_back(dt);
    else
      s.intervals[s.next_interval++ % kStepWindow] = dt;
  }
  s.step = step;
  s.step_started = now;
  s.progressed_now();
}

void set_phase(const char* phase) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.m);
  s.phase = phase;
  s.progressed_now();
}

void tick() {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.m);
  s.progressed_now();
}

Collective issued(Collective c) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.m);
  c.seq = ++s.issued;
  s.last_issued = c;
  s.progressed_now();
  return c;
}

Waiting::Waiting(const Collective& c) {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.m);
  for (int i = 0; i < kWaitSlots && slot_ < 0; ++i)
    if (!s.waits[i].alive) {
      s.waits[i] = {true, c, Clock::now()};
      slot_ = i;
    }
  s.progressed_now();
}

Waiting::~Waiting() {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.m);
  if (slot_ >= 0) s.waits[slot_].alive = false;
  s.progressed_now();
}

Snapshot snapshot() {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.m);
  Snapshot out;
  out.step = s.step;
  out.phase = s.phase;
  out.progress = s.progress;
  out.progress_age_s = since(s.progressed);
  out.issued = s.issued;
  out.last_issued = s.last_issued;
  const State::Wait* oldest = nullptr;
  for (const State::Wait& w : s.waits)
    if (w.alive && (!oldest || w.since < oldest->since)) oldest = &w;
  out.waiting = oldest != nullptr;
  if (oldest) {
    out.waiting_in = oldest->in;
    out.waited_s = since(oldest->since);
  }
  return out;
}

double median_step_s() {
  State& s = state();
  std::vector<double> v;
  {
    std::lock_guard<std::mutex> lk(s.m);
    v = s.intervals;
  }
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lk(s.m);
  s.step = -1;
  s.phase = "start";
  s.progress = 0;
  s.progressed = Clock::now();
  s.issued = 0;
  s.last_issued = Collective();
  for (State::Wait& w : s.waits) w = State::Wait();
  s.intervals.clear();
  s.next_interval = 0;
}

}  // namespace sb::heartbeat
