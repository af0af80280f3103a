// The stall watchdog's rules and messages (harness/core/watchdog.h, stall_verdict) and the
// heartbeat state workloads update (harness/core/heartbeat.h), without MPI. The watchdog end
// to end (SIGSTOP, a hung rank) is tests/failure/failure_paths.sh stall-stop / stall-hang.
#include <chrono>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "harness/core/heartbeat.h"
#include "harness/core/watchdog.h"

namespace sb {
namespace {

// n ranks on host "node-a", heard, progressing, in no collective.
std::vector<PeerView> ranks(int n) {
  std::vector<PeerView> v(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    v[r].rank = r;
    v[r].host = "node-a";
    v[r].heard = true;
    v[r].step = 3;
    v[r].phase = "forward";
    v[r].progress_age_s = 0.1;
    v[r].last_issued = "all_gather #41 (param_all_gather, shard group) on mpi";
  }
  return v;
}

void waits(PeerView& v, const std::string& in, double s) {
  v.waiting = true;
  v.waiting_in = in;
  v.waited_s = s;
  v.progress_age_s = s;
}

const char* kGather = "all_gather #42 (param_all_gather, shard group) on mpi";

TEST(StallVerdict, NothingWhileEveryRankProgresses) {
  auto v = ranks(4);
  waits(v[2], kGather, 4.0);  // a wait shorter than the timeout
  EXPECT_FALSE(stall_verdict(v, 5.0));
}

TEST(StallVerdict, SilentRankIsNamedWithItsLastHeartbeatAndWhereTheOthersWait) {
  auto v = ranks(2);
  v[1].silent_s = 5.3;
  v[1].phase = "step start";
  v[1].step = 2;
  waits(v[0], kGather, 5.2);
  const auto verdict = stall_verdict(v, 5.0);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->stalled, std::vector<int>{1});
  EXPECT_EQ(verdict->message,
            "rank 1 on node-a stalled: no heartbeat for 5.3 s (stall_timeout 5 s): its process "
            "is stopped or hung in the kernel, or its node is lost. Its last heartbeat: step 2, "
            "phase step start, not in a collective; last collective issued: all_gather #41 "
            "(param_all_gather, shard group) on mpi. The others: rank 0 waits in all_gather #42 "
            "(param_all_gather, shard group) on mpi (for 5.2 s). If rank 1 was busy on purpose, "
            "raise stall_timeout (0 turns the watchdog off)");
}

TEST(StallVerdict, OthersAreGroupedByTheCollectiveTheyWaitIn) {
  auto v = ranks(6);
  v[3].silent_s = 9;
  for (int r : {0, 1, 2, 4}) waits(v[r], kGather, 6.0 + r);
  v[5].host = "node-b";
  const auto verdict = stall_verdict(v, 5.0);
  ASSERT_TRUE(verdict);
  const std::string& m = verdict->message;
  EXPECT_NE(m.find("The others: ranks 0-2, 4 wait in all_gather #42 (param_all_gather, shard "
                   "group) on mpi (for 10.0 s); rank 5 is in no collective (phase forward, "
                   "step 3). If rank 3"),
            std::string::npos) << m;
}

TEST(StallVerdict, ALostNodeBlamesEachOfItsRanks) {
  auto v = ranks(4);
  for (int r : {2, 3}) {
    v[r].host = "node-b";
    v[r].silent_s = 7.0;
  }
  const auto verdict = stall_verdict(v, 5.0);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->stalled, (std::vector<int>{2, 3}));
  EXPECT_NE(verdict->message.find("rank 2 on node-b stalled: no heartbeat for 7.0 s"),
            std::string::npos);
  EXPECT_NE(verdict->message.find(". Also rank 3 on node-b stalled: no heartbeat"),
            std::string::npos);
  EXPECT_NE(verdict->message.find("If ranks 2-3 were busy"), std::string::npos);
}

TEST(StallVerdict, LiveRankWithoutProgressIsAStallOnlyWhileOthersWaitForIt) {
  auto v = ranks(2);
  v[1].progress_age_s = 8.0;  // beats (silent_s 0) but has not moved
  v[1].phase = "step start";
  EXPECT_FALSE(stall_verdict(v, 5.0)) << "nobody waits for it: a long compute phase";
  waits(v[0], kGather, 4.9);
  EXPECT_FALSE(stall_verdict(v, 5.0)) << "the wait is still shorter than the timeout";
  waits(v[0], kGather, 6.0);
  const auto verdict = stall_verdict(v, 5.0);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->stalled, std::vector<int>{1});
  EXPECT_EQ(verdict->message,
            "rank 1 on node-a stalled: alive but no progress for 8.0 s outside any collective "
            "(stall_timeout 5 s) while other ranks wait for it. Its last heartbeat: step 3, "
            "phase step start, not in a collective; last collective issued: all_gather #41 "
            "(param_all_gather, shard group) on mpi. The others: rank 0 waits in all_gather "
            "#42 (param_all_gather, shard group) on mpi (for 6.0 s). If rank 1 was busy on "
            "purpose, raise stall_timeout (0 turns the watchdog off)");
}

TEST(StallVerdict, EveryRankWaitingNamesEachRanksCollective) {
  auto v = ranks(3);
  waits(v[0], kGather, 7.0);
  waits(v[1], kGather, 6.0);
  waits(v[2], "reduce_scatter #42 (grad_reduce_scatter, shard group) on mpi", 6.5);
  const auto verdict = stall_verdict(v, 5.0);
  ASSERT_TRUE(verdict);
  EXPECT_TRUE(verdict->stalled.empty());
  EXPECT_EQ(verdict->message,
            "every rank has waited in a collective for over 5.0 s (stall_timeout 5 s): a "
            "deadlock, a collective issued on some ranks only, or a hung network or device. "
            "ranks 0-1 wait in all_gather #42 (param_all_gather, shard group) on mpi (for 7.0 s); "
            "rank 2 waits in reduce_scatter #42 (grad_reduce_scatter, shard group) on mpi (for "
            "6.5 s). If a collective may take this long, raise stall_timeout (0 turns the "
            "watchdog off)");
}

TEST(StallVerdict, UnheardAndFinishedRanksAreNotJudged) {
  auto v = ranks(3);
  v[1].heard = false;  // UDP blocked: never watched
  v[1].silent_s = 100;
  v[2].done = true;  // finished the point: its silence is expected
  v[2].silent_s = 100;
  EXPECT_FALSE(stall_verdict(v, 5.0));
  waits(v[0], kGather, 6.0);  // it may wait for rank 1, of which nothing is known
  EXPECT_FALSE(stall_verdict(v, 5.0));
  v[1].heard = true;
  v[1].silent_s = 0.5;
  waits(v[1], kGather, 6.0);  // both live ranks wait: for rank 2, which has finished
  const auto verdict = stall_verdict(v, 5.0);
  ASSERT_TRUE(verdict);
  EXPECT_TRUE(verdict->stalled.empty());
  EXPECT_NE(verdict->message.find("ranks 0-1 wait in all_gather #42"), std::string::npos);
}

TEST(StallTimeout, ExplicitAsGivenAutomaticTenMediansAtLeastAMinute) {
  EXPECT_EQ(stall_timeout_s(2.5, 100.0), 2.5);  // tests use a few seconds
  EXPECT_EQ(stall_timeout_s(-1, 0.0), 60.0);      // before any step
  EXPECT_EQ(stall_timeout_s(-1, 3.0), 60.0);
  EXPECT_EQ(stall_timeout_s(-1, 12.5), 125.0);
}

TEST(Heartbeat, StepsPhasesAndTheMedianStepTime) {
  heartbeat::reset();
  EXPECT_EQ(heartbeat::median_step_s(), 0.0);
  heartbeat::set_step(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  heartbeat::set_step(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  heartbeat::set_step(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  heartbeat::set_step(3);
  heartbeat::set_phase("forward");
  const double m = heartbeat::median_step_s();
  EXPECT_GE(m, 0.02);
  EXPECT_LT(m, 0.2);  // the median of 20, 300, 20 ms, not their mean (113 ms)
  const auto s = heartbeat::snapshot();
  EXPECT_EQ(s.step, 3);
  EXPECT_STREQ(s.phase, "forward");
  EXPECT_FALSE(s.waiting);
  EXPECT_LT(s.progress_age_s, 0.05);
}

TEST(Heartbeat, CollectivesAreCountedAndTheOldestWaitNamesIt) {
  heartbeat::reset();
  const auto a = heartbeat::issued({"all_gather", "shard", "mpi", "param_all_gather"});
  const auto b = heartbeat::issued({"all_reduce", "world", "gloo", "other"});
  EXPECT_EQ(a.seq, 1u);
  EXPECT_EQ(b.seq, 2u);
  EXPECT_EQ(a.describe(), "all_gather #1 (param_all_gather, shard group) on mpi");
  EXPECT_EQ(heartbeat::Collective("MPI_Allreduce", "", "mpi", "").describe(),
            "MPI_Allreduce #0 on mpi");
  // Backend and kind are copied, truncated: nothing points into the caller's strings.
  EXPECT_EQ(heartbeat::Collective("all_reduce", "world", std::string(40, 'b'), std::string(40, 'k'))
                .describe(),
            "all_reduce #0 (" + std::string(31, 'k') + ", world group) on " + std::string(15, 'b'));
  {
    heartbeat::Waiting outer(a);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    {
      heartbeat::Waiting inner(b);
      const auto s = heartbeat::snapshot();
      EXPECT_TRUE(s.waiting);
      EXPECT_EQ(s.waiting_in.describe(), "all_gather #1 (param_all_gather, shard group) on mpi")
          << "the oldest wait names it: what the others are held in";
      EXPECT_GE(s.waited_s, 0.03) << "waiting since the oldest scope began";
    }
    EXPECT_TRUE(heartbeat::snapshot().waiting);
  }
  EXPECT_FALSE(heartbeat::snapshot().waiting);
  // Scopes on two threads (the communication thread in a transfer, then the caller waiting
  // for a later request): the oldest names the wait until it ends, then the other does.
  {
    auto inner = std::make_unique<heartbeat::Waiting>(a);
    std::thread caller([&] {
      heartbeat::Waiting w(b);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_EQ(heartbeat::snapshot().waiting_in.seq, 1u);
      inner.reset();  // the transfer completed
      const auto s = heartbeat::snapshot();
      EXPECT_TRUE(s.waiting);
      EXPECT_EQ(s.waiting_in.seq, 2u);
      EXPECT_GE(s.waited_s, 0.02);
      EXPECT_LT(s.waited_s, 1.0);
    });
    caller.join();
  }
  const auto s = heartbeat::snapshot();
  EXPECT_FALSE(s.waiting);
  EXPECT_EQ(s.issued, 2u);
  EXPECT_EQ(s.last_issued.describe(), "all_reduce #2 (other, world group) on gloo");
}

}  // namespace
}  // namespace sb
