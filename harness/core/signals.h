// Turns SIGTERM / SIGUSR1 / SIGINT (Slurm sends one before the time limit) and a point's time
// limit into sb::StopFlag, which workloads poll between steps to finish with a partial trace.
#pragma once
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "harness/core/stop_flag.h"

namespace sb {

enum class StopCause { None, Signal, TimeLimit };

// Installs handlers for SIGTERM, SIGUSR1 and SIGINT that only record the signal number (all a
// handler may do safely). Idempotent.
void install_stop_signals();
// The last stop signal received since install_stop_signals(), 0 if none.
int received_stop_signal();

// A watcher thread that sets `flag` (with a reason) when a stop signal arrives or when
// time_limit_s (0 = none) has passed since construction. Joined in the destructor.
class StopWatcher {
 public:
  StopWatcher(StopFlag& flag, double time_limit_s);
  ~StopWatcher();
  StopWatcher(const StopWatcher&) = delete;
  StopWatcher& operator=(const StopWatcher&) = delete;

  // Why the flag was set (valid after the flag is set; None otherwise).
  StopCause cause() const { return cause_.load(); }

 private:
  void watch(double time_limit_s);
  StopFlag& flag_;
  std::atomic<StopCause> cause_{StopCause::None};
  std::mutex mu_;
  std::condition_variable cv_;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace sb
