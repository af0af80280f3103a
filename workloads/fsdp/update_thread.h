// The offloaded optimizer's update overlapped with the next forward (offload_overlap; docs/
// FSDP.md "Optimizer state on disk"). With the Adam moments on disk the update is I/O-bound
// (2 FLOPs a byte) and each unit's only reader before the next update is the next forward's
// all-gather of that unit. So after backward (the gradient norm and clip need every
// gradient, which is why the update cannot start inside backward) the units are updated in
// the order the last forward acquired them, on this thread while the caller returns, and the next forward waits per
// unit (await) just before gathering it: unit u's I/O hides behind the forward of units
// before it. The update itself is the same function on the same data in the same order, so
// results are the synchronous update's bit for bit.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sb::fsdp {

class UpdateThread {
 public:
  UpdateThread() = default;
  ~UpdateThread();  // joins; an error not yet rethrown is dropped
  UpdateThread(const UpdateThread&) = delete;
  UpdateThread& operator=(const UpdateThread&) = delete;

  // Runs update(u) for each u of order (a permutation of 0 .. n - 1), in that order, on a new
  // thread (the previous run must be drained).
  void start(std::vector<int> order, std::function<void(int)> update);
  // Returns once update(u) has finished (at once when nothing runs); the time spent waiting
  // is counted in wait_s. Rethrows the thread's exception (after joining it).
  void await(int u);
  // Whether update(u) has finished (or nothing runs): never blocks.
  bool done(int u) const;
  // Waits for every update of the run and joins; rethrows its exception.
  void drain();
  double wait_s() const { return wait_s_; }  // await's waits, this object's life

 private:
  void join_and_rethrow();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  std::vector<char> done_;  // update(u) finished
  bool over_ = true;        // the run has finished (or failed)
  std::exception_ptr error_;
  double wait_s_ = 0;
};

}  // namespace sb::fsdp
