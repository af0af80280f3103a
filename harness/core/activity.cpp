// The rank's current phase and step (activity.h).
#include "harness/core/activity.h"

#include <atomic>

#include <fmt/format.h>

#include "harness/core/heartbeat.h"

namespace sb {
namespace {
std::atomic<const char*> g_phase{nullptr};
std::atomic<std::int64_t> g_step{-1};
}  // namespace

// The stall watchdog's heartbeat carries the same marks (one call site per stage).
void set_phase(const char* phase) {
  g_phase = phase;
  heartbeat::set_phase(phase);
}
void set_phase_step(std::int64_t step) {
  g_step = step;
  heartbeat::set_step(step);
}

std::string current_activity() {
  const char* phase = g_phase.load();
  const std::int64_t step = g_step.load();
  if (!phase) return step >= 0 ? fmt::format("step {}", step) : "";
  const std::string p = phase;
  if (p == "step") return step >= 0 ? fmt::format("step {}", step) : "a step";
  return step >= 0 ? fmt::format("{} after step {}", p, step) : p;
}

}  // namespace sb
