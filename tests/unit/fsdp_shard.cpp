// Shard arithmetic: exact ranges, padding, units smaller than the group, refusals.
#include <gtest/gtest.h>

#include "harness/core/check.h"
#include "workloads/fsdp/shard.h"

using sb::fsdp::shard_range;

TEST(ShardRange, EvenSplit) {
  for (int r = 0; r < 4; ++r) {
    auto s = shard_range(100, 4, r);
    EXPECT_EQ(s.padded, 100);
    EXPECT_EQ(s.size, 25);
    EXPECT_EQ(s.offset, 25 * r);
    EXPECT_EQ(s.valid, 25);
  }
}

TEST(ShardRange, PaddingGoesToTheLastRanks) {
  // 10 elements over 3 ranks: padded to 12, shards of 4; the last shard holds 2 real ones.
  EXPECT_EQ(shard_range(10, 3, 0).valid, 4);
  EXPECT_EQ(shard_range(10, 3, 1).valid, 4);
  auto last = shard_range(10, 3, 2);
  EXPECT_EQ(last.padded, 12);
  EXPECT_EQ(last.offset, 8);
  EXPECT_EQ(last.valid, 2);
}

TEST(ShardRange, UnitSmallerThanTheGroup) {
  // 2 elements over 4 ranks: every rank holds one element, ranks 2 and 3 only padding.
  std::int64_t total_valid = 0;
  for (int r = 0; r < 4; ++r) {
    auto s = shard_range(2, 4, r);
    EXPECT_EQ(s.size, 1);
    EXPECT_EQ(s.padded, 4);
    total_valid += s.valid;
    EXPECT_EQ(s.valid, r < 2 ? 1 : 0);
  }
  EXPECT_EQ(total_valid, 2);
  auto empty = shard_range(0, 3, 1);
  EXPECT_EQ(empty.size, 0);
  EXPECT_EQ(empty.valid, 0);
}

TEST(ShardRange, ValidSumsToNumelForManySizes) {
  for (std::int64_t n : {1, 7, 64, 1000, 12345})
    for (int g = 1; g <= 8; ++g) {
      std::int64_t sum = 0;
      for (int r = 0; r < g; ++r) {
        auto s = shard_range(n, g, r);
        EXPECT_EQ(s.padded % g, 0);
        EXPECT_LT(s.padded - n, g);
        sum += s.valid;
      }
      EXPECT_EQ(sum, n) << n << " over " << g;
    }
}

TEST(ShardRange, RefusesBadInputs) {
  auto msg = [](auto f) {
    try {
      f();
    } catch (const sb::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg([] { shard_range(-1, 2, 0); }).find("a unit cannot have -1 parameters"),
            std::string::npos);
  EXPECT_NE(msg([] { shard_range(10, 0, 0); }).find("group size 0 must be at least 1"),
            std::string::npos);
  EXPECT_NE(msg([] { shard_range(10, 4, 4); }).find("rank 4 is outside the group of 4 ranks"),
            std::string::npos);
  EXPECT_NE(msg([] { shard_range(10, 4, -1); }).find("rank -1 is outside"), std::string::npos);
}

TEST(FlatLayout, OffsetsAreBackToBack) {
  auto l = sb::fsdp::flat_layout({6, 3, 0, 5});
  EXPECT_EQ(l.numel, 14);
  EXPECT_EQ(l.offsets, (std::vector<std::int64_t>{0, 6, 9, 9}));
}
