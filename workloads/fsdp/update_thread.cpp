#include "workloads/fsdp/update_thread.h"

#include <chrono>

#include "harness/core/check.h"

namespace sb::fsdp {

UpdateThread::~UpdateThread() {
  if (thread_.joinable()) thread_.join();
}

void UpdateThread::start(std::vector<int> order, std::function<void(int)> update) {
  SB_CHECK(!thread_.joinable(), "UpdateThread::start while the previous run is in flight (drain it first)");
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.assign(order.size(), 0);
    over_ = false, error_ = nullptr;
  }
  thread_ = std::thread([this, order = std::move(order), update = std::move(update)] {
    for (const int u : order) {
      try {
        update(u);
      } catch (...) {  // handed to the caller's next await or drain; the waiters wake
        std::lock_guard<std::mutex> lock(mu_);
        error_ = std::current_exception();
        over_ = true;
        cv_.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      done_[static_cast<std::size_t>(u)] = 1;
      cv_.notify_all();
    }
    std::lock_guard<std::mutex> lock(mu_);
    over_ = true;
    cv_.notify_all();
  });
}

bool UpdateThread::done(int u) const {
  std::lock_guard<std::mutex> lock(mu_);
  return over_ || done_[static_cast<std::size_t>(u)];
}

void UpdateThread::await(int u) {
  if (!thread_.joinable()) return;  // only the caller's thread starts and joins
  const auto t0 = std::chrono::steady_clock::now();
  bool over = false;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return over_ || done_[static_cast<std::size_t>(u)]; });
    over = over_;
  }
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (over) join_and_rethrow();
}

void UpdateThread::drain() {
  if (!thread_.joinable()) return;
  const auto t0 = std::chrono::steady_clock::now();
  join_and_rethrow();
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void UpdateThread::join_and_rethrow() {
  if (thread_.joinable()) thread_.join();
  std::exception_ptr e;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(e, error_);
  }
  if (e) std::rethrow_exception(e);
}

}  // namespace sb::fsdp
