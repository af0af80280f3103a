// A transfer: the bytes of one plain collective moving on one library. Each backend
// (backend.h: backend_mpi.cpp, backend_gloo.cpp, backend_nccl.cpp) implements it for its
// library; the progress engine (progress_engine.h) decides when a transfer runs, on which
// thread, and whether the caller blocks, through these four calls only, and knows no library.
#pragma once

namespace sb::comm {

class Transfer {
 public:
  virtual ~Transfer() = default;
  // Moves the bytes on the calling thread and returns when the output is in place: the
  // library's blocking call where it has one (MPI's tuned algorithms), else start + wait.
  virtual void run() = 0;
  // Non-blocking: start() once, then test() until it returns true, or wait(). Once either
  // reported completion the output is in place (staged copies back, local reductions done)
  // and neither is called again. All four throw the transfer's error (sb::Error, naming the
  // library call and the group).
  virtual void start() = 0;
  virtual bool test() = 0;
  // NCCL: the stream that issued the collective waits, the host does not.
  virtual void wait() = 0;
};

}  // namespace sb::comm
