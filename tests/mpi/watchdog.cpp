// The stall watchdog's inputs and its quiet side (harness/core/watchdog.h): the heartbeat
// names the collective a rank waits in, under every progress mode, blocking and in flight;
// and a watchdog with a 1 s timeout ends nothing in a run without a stall: a rank computing
// for longer than the timeout while nobody waits for it, and ranks finishing seconds apart.
// (A stall that must end every rank is tests/failure/failure_paths.sh stall-stop/stall-hang:
// it ends the processes, which a gtest cannot survive.)
#include <torch/types.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "harness/core/heartbeat.h"
#include "harness/core/watchdog.h"
#include "workloads/comm/communicator.h"

using sb::comm::Communicator;
using sb::comm::Group;
using sbtest::world_rank;
using sbtest::world_size;

namespace {

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// While `fn` runs on this thread, what the heartbeat said about waiting 0.3 s into it (rank
// 1 joins the collective 0.6 s late, so every other rank is blocked in it then).
std::string waiting_during(const std::function<void()>& fn) {
  std::string seen = "(not waiting)";
  std::thread spy([&] {
    sleep_s(0.3);
    const auto s = sb::heartbeat::snapshot();
    if (s.waiting) seen = s.waiting_in.describe();
  });
  fn();
  spy.join();
  return seen;
}

TEST(Watchdog, HeartbeatNamesTheCollectiveARankWaitsIn) {
  // Every registered runner (comm_progress): each blocks in its own places (a transfer's
  // blocking call on the communication thread, poll's test loop, the caller's wait).
  const auto runners = sb::comm::progress_names();
  ASSERT_GE(runners.size(), 3u);
  for (const std::string& m : runners) {
    sb::heartbeat::reset();
    Communicator comm(MPI_COMM_WORLD);
    comm.set_progress(m);
    const int n = world_size();
    auto shard = torch::ones({4}), full = torch::zeros({4 * n});
    const bool late = world_rank() == 1;
    // In flight: issued, then waited for.
    const std::string in_flight = waiting_during([&] {
      if (late) sleep_s(0.6);
      comm.all_gather_async(shard, full, Group::World, "param_all_gather").wait();
    });
    // Blocking.
    const std::string blocking = waiting_during([&] {
      if (late) sleep_s(0.6);
      comm.all_reduce(full, Group::World, "grad_all_reduce");
    });
    if (!late) {
      EXPECT_EQ(in_flight, "all_gather #1 (param_all_gather, world group) on mpi") << m;
      EXPECT_EQ(blocking, "all_reduce #2 (grad_all_reduce, world group) on mpi") << m;
    }
    const auto s = sb::heartbeat::snapshot();
    EXPECT_FALSE(s.waiting) << m;
    EXPECT_EQ(s.issued, 2u) << m;
  }
}

TEST(Watchdog, NoStallNoVerdict) {
  sb::heartbeat::reset();
  auto dog = sb::make_watchdog(MPI_COMM_WORLD, 1.0);
  ASSERT_NE(dog, nullptr);
  Communicator comm(MPI_COMM_WORLD);
  auto t = torch::ones({8});
  for (int step = 0; step < 3; ++step) {
    sb::heartbeat::set_step(step);
    comm.all_reduce(t, Group::World, "grad_all_reduce");
  }
  // Rank 0 computes 2.5 s (2.5 timeouts) without progress; the others wait for it outside
  // any collective the heartbeat knows (a plain MPI_Barrier): nobody is held up in one.
  sb::heartbeat::set_phase("long compute");
  if (world_rank() == 0) sleep_s(2.5);
  MPI_Barrier(MPI_COMM_WORLD);
  // Ranks finish 1.5 s apart: the last one outlives the first ones' heartbeats by more than
  // the timeout, and must take their "done" for an end, not a stall.
  sleep_s(1.5 * world_rank());
  dog->stop();
  sleep_s(1.5 * (world_size() - 1 - world_rank()) + 1.0);
  SUCCEED();  // a verdict would have ended every rank (MPI_Abort) before this
}

TEST(Watchdog, ZeroTurnsItOff) {
  EXPECT_EQ(sb::make_watchdog(MPI_COMM_WORLD, 0.0), nullptr);
}

}  // namespace
