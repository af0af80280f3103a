// Stop signals and time limits -> sb::StopFlag.
#include "harness/core/signals.h"

#include <csignal>
#include <cstring>

#include <chrono>

#include <fmt/format.h>

namespace sb {
namespace {
// sig_atomic_t-sized, lock-free: the only thing the handler touches.
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) { g_signal = sig; }
}  // namespace

void install_stop_signals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // keep blocking calls (MPI, I/O) running; we poll instead
  for (int s : {SIGTERM, SIGUSR1, SIGINT}) sigaction(s, &sa, nullptr);
}

int received_stop_signal() { return g_signal; }

StopWatcher::StopWatcher(StopFlag& flag, double time_limit_s) : flag_(flag) {
  thread_ = std::thread([this, time_limit_s] { watch(time_limit_s); });
}

StopWatcher::~StopWatcher() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StopWatcher::watch(double time_limit_s) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  while (!quit_) {
    // Polling at 20 Hz: a signal handler cannot wake a condition variable safely.
    cv_.wait_for(lk, std::chrono::milliseconds(50));
    if (flag_.stop()) continue;
    const int sig = received_stop_signal();
    const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
    if (sig != 0) {
      flag_.reason = fmt::format("stopped by signal {} ({})", sig, strsignal(sig));
      cause_ = StopCause::Signal;
      flag_.requested.store(true, std::memory_order_release);
    } else if (time_limit_s > 0 && elapsed >= time_limit_s) {
      flag_.reason = fmt::format("time limit of {} s reached", time_limit_s);
      cause_ = StopCause::TimeLimit;
      flag_.requested.store(true, std::memory_order_release);
    }
  }
}

}  // namespace sb
