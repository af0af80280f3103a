// A point's stop request (harness/core/signals.h sets it; workloads read it through
// RunContext::stop_agreed(), harness/workload.h).
#pragma once
#include <atomic>
#include <string>

namespace sb {

// Set by SIGTERM/SIGUSR1 (Slurm's pre-timeout signal) or the time limit. Each rank's flag is
// set by its own watcher, at slightly different moments, so workloads never act on it
// directly: they call RunContext::stop_agreed() between steps, which every rank answers alike.
struct StopFlag {
  std::atomic<bool> requested{false};
  std::string reason;
  bool stop() const { return requested.load(std::memory_order_relaxed); }
};

}  // namespace sb
