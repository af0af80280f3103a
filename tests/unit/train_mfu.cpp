// MFU (workloads/train/mfu.h): the formula, and never above 1: with a fake peak below what
// the step achieved there is no figure, and the reason names both rates.
#include <gtest/gtest.h>

#include <cmath>

#include "workloads/train/mfu.h"

using sb::train::model_flops_utilisation;

TEST(Mfu, IsAchievedOverPeak) {
  // 1e9 FLOPs/token x 100 tokens in 1 s on 2 ranks = 50 GFLOP/s per rank; peak 200.
  const auto m = model_flops_utilisation(1e9, 100, 1.0, 200.0, 2);
  EXPECT_DOUBLE_EQ(m.value, 0.25);
  EXPECT_TRUE(m.invalid.empty());
  EXPECT_DOUBLE_EQ(model_flops_utilisation(1e9, 100, 1.0, 50.0, 2).value, 1.0);  // exactly 1
}

TEST(Mfu, NeverExceedsOneWithAFakePeak) {
  const auto m = model_flops_utilisation(1e9, 100, 1.0, 0.5, 2);  // achieved 50, "peak" 0.5
  EXPECT_TRUE(std::isnan(m.value));
  EXPECT_NE(m.invalid.find("achieved 50.0 model GFLOP/s per rank, above the peak it would "
                           "divide by (0.5)"), std::string::npos) << m.invalid;
}

TEST(Mfu, NoPeakOrTimeIsNoFigure) {
  EXPECT_TRUE(std::isnan(model_flops_utilisation(1e9, 100, 0.0, 200.0, 2).value));
  EXPECT_TRUE(std::isnan(model_flops_utilisation(1e9, 100, 1.0, 0.0, 2).value));
}

TEST(Mfu, AboveOneSaysWhatItMeansForThatPeak) {
  const auto m = model_flops_utilisation(1e9, 100, 1.0, 0.5, 2, "the ISA rule does not fit");
  EXPECT_TRUE(std::isnan(m.value));
  EXPECT_NE(m.invalid.find("above the peak it would divide by (0.5); the ISA rule does not fit"),
            std::string::npos) << m.invalid;
}
