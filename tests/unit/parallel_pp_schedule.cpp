// Pipeline schedules (workloads/parallel/pp_schedule.h) in the simulator: every schedule runs
// each stage's forward and backward of every micro-batch exactly once without deadlock for
// p = 2..4, m = 1..8 (interleaved: v = 2, 3 and m % p == 0); GPipe's and 1F1B's bubble is
// exactly (p - 1) / (m + p - 1) with equal or unequal forward and backward times, the
// interleaved one's (p - 1) / (v m + p - 1) with equal ones; 1F1B holds at most p - r
// micro-batches' activations on rank r where GPipe holds m; a plan that deadlocks or skips a
// micro-batch is reported; bad settings are refused naming the key and the fix.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "harness/core/check.h"
#include "workloads/parallel/pp_schedule.h"

using namespace sb::parallel;

namespace {

TEST(PpSchedule, RegisteredByName) {
  EXPECT_EQ(pp_schedule_names(), (std::vector<std::string>{"1f1b", "gpipe", "interleaved_1f1b"}));
  EXPECT_TRUE(find_pp_schedule("interleaved_1f1b").virtual_stages);
  EXPECT_TRUE(find_pp_schedule("interleaved_1f1b").needs_divisible);
  EXPECT_FALSE(find_pp_schedule("1f1b").virtual_stages);
  try {
    find_pp_schedule("zb");
    ADD_FAILURE();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("known: 1f1b, gpipe, interleaved_1f1b"), std::string::npos);
  }
}

TEST(PpSchedule, GpipeAnd1f1bBubbleIsTheFormula) {
  for (const char* name : {"gpipe", "1f1b"})
    for (int p = 2; p <= 4; ++p)
      for (int m = 1; m <= 8; ++m)
        for (double tb : {1.0, 2.0}) {
          const auto& s = find_pp_schedule(name);
          const PpSimulation sim = simulate(s.make(p, m, 1), p, m, 1, 1.0, tb);
          EXPECT_NEAR(sim.makespan, (m + p - 1) * (1.0 + tb), 1e-9) << name << " p" << p << " m" << m;
          for (int r = 0; r < p; ++r)
            EXPECT_NEAR(sim.bubble(r), ideal_bubble(p, m, 1), 1e-9) << name << " p" << p << " m" << m;
        }
}

TEST(PpSchedule, OneFOneBHoldsFewerActivations) {
  for (int p = 2; p <= 4; ++p)
    for (int m = 1; m <= 8; ++m) {
      const auto g = simulate(find_pp_schedule("gpipe").make(p, m, 1), p, m, 1, 1, 2);
      const auto f = simulate(find_pp_schedule("1f1b").make(p, m, 1), p, m, 1, 1, 2);
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(g.peak_in_flight[r], m);
        EXPECT_EQ(f.peak_in_flight[r], std::min(p - r, m)) << "p" << p << " m" << m << " r" << r;
      }
    }
}

TEST(PpSchedule, InterleavedBubbleShrinksByV) {
  const auto& s = find_pp_schedule("interleaved_1f1b");
  for (int p = 2; p <= 4; ++p)
    for (int v : {2, 3})
      for (int m = p; m <= 8; m += p) {
        const PpSimulation sim = simulate(s.make(p, m, v), p, m, v, 1.0, 1.0);
        for (int r = 0; r < p; ++r)
          EXPECT_NEAR(sim.bubble(r), ideal_bubble(p, m, v), 1e-9)
              << "p" << p << " v" << v << " m" << m << " r" << r;
        // Unequal forward and backward: still every action once, and below 1F1B's bubble.
        const PpSimulation uneq = simulate(s.make(p, m, v), p, m, v, 1.0, 2.0);
        EXPECT_LT(uneq.bubble(0), ideal_bubble(p, m, 1));
      }
}

TEST(PpSchedule, DeadlocksAndSkipsAreReported) {
  PpPlan bad(2);
  bad[0] = {{false, 0, 0}, {true, 0, 0}};  // a backward before its forward: never runs
  bad[1] = {{true, 0, 0}, {false, 0, 0}};
  try {
    simulate(bad, 2, 1, 1, 1, 1);
    ADD_FAILURE();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlocks"), std::string::npos) << e.what();
  }
  PpPlan skip = find_pp_schedule("gpipe").make(2, 2, 1);
  skip[0].pop_back();  // stage 0's last backward: nothing waits for it
  try {
    simulate(skip, 2, 2, 1, 1, 1);
    ADD_FAILURE();
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("never runs the backward of micro-batch 1"),
              std::string::npos) << e.what();
  }
}

TEST(PpSchedule, RefusalsNameTheKeyAndFix) {
  EXPECT_NE(pp_schedule_refuses(find_pp_schedule("interleaved_1f1b"), 2, 3, 2)
                .find("microbatches (3) divisible by mesh.pp (2)"), std::string::npos);
  EXPECT_NE(pp_schedule_refuses(find_pp_schedule("1f1b"), 2, 4, 2).find("pp_virtual_stages = 1"),
            std::string::npos);
  EXPECT_EQ(pp_schedule_refuses(find_pp_schedule("interleaved_1f1b"), 2, 4, 2), "");
}

}  // namespace
