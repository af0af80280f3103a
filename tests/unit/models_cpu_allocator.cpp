// The caching CPU allocator (workloads/models/cpu_allocator.cpp): blocks of >= 1 MiB are
// reused by size class, and over the cache limit the least recently freed block goes back to
// the OS, not the one just freed.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <string>

#include "workloads/models/cpu_allocator.h"

namespace {
using sb::models::cpu_cache_stats;
constexpr std::int64_t kMiB = 1 << 20;

void* block(std::int64_t bytes) {  // allocates, remembers the address, frees
  auto t = torch::empty({bytes}, torch::kUInt8);
  return t.data_ptr();
}
}  // namespace

TEST(CpuAllocator, ReusesABlockOfTheSameSizeClass) {
  ASSERT_TRUE(cpu_cache_stats().installed);
  sb::models::release_cpu_cache();
  void* a = block(3 * kMiB);
  const auto s = cpu_cache_stats();
  EXPECT_EQ(s.cached_bytes, static_cast<std::uint64_t>(3 * kMiB));
  EXPECT_EQ(block(3 * kMiB - 100), a);  // same 64 KiB class: the cached block
  EXPECT_EQ(cpu_cache_stats().hits, s.hits + 1);
}

TEST(CpuAllocator, OverTheLimitTheLeastRecentlyFreedGoesFirst) {
  sb::models::release_cpu_cache();
  sb::models::set_cpu_cache_limit(4 * kMiB);
  auto A = torch::empty({1 * kMiB}, torch::kUInt8), B = torch::empty({2 * kMiB}, torch::kUInt8),
       C = torch::empty({3 * kMiB / 2}, torch::kUInt8);
  void* b = B.data_ptr();
  void* c = C.data_ptr();
  const auto ev = cpu_cache_stats().evictions;
  A = torch::Tensor();  // cached: 1 MiB
  B = torch::Tensor();  // cached: 3 MiB
  C = torch::Tensor();  // 4.5 MiB > 4: A, freed longest ago, is evicted; C is kept
  auto s = cpu_cache_stats();
  EXPECT_EQ(s.evictions, ev + 1);
  EXPECT_EQ(s.cached_bytes, static_cast<std::uint64_t>(2 * kMiB + 3 * kMiB / 2));
  EXPECT_EQ(block(3 * kMiB / 2), c);
  EXPECT_EQ(block(2 * kMiB), b);
  // Lowering the limit evicts at once, oldest first: c (freed again before b) goes.
  sb::models::set_cpu_cache_limit(2 * kMiB);
  s = cpu_cache_stats();
  EXPECT_EQ(s.cached_bytes, static_cast<std::uint64_t>(2 * kMiB));
  EXPECT_EQ(block(2 * kMiB), b);
  sb::models::set_cpu_cache_limit(std::uint64_t{1} << 40);
  sb::models::release_cpu_cache();
}

TEST(CpuAllocator, ABlockLargerThanTheLimitIsNotCached) {
  sb::models::release_cpu_cache();
  sb::models::set_cpu_cache_limit(2 * kMiB);
  block(3 * kMiB);
  EXPECT_EQ(cpu_cache_stats().cached_bytes, 0u);
  sb::models::set_cpu_cache_limit(std::uint64_t{1} << 40);
}

// A peak records the phase set when it rose (set_cpu_phase); a later, lower high leaves it;
// reset_cpu_peak starts from the phase current then.
TEST(CpuAllocator, APeakNamesThePhaseItRoseIn) {
  using sb::models::cpu_peak_phase;
  using sb::models::set_cpu_phase;
  set_cpu_phase("idle");
  sb::models::reset_cpu_peak();
  EXPECT_EQ(cpu_peak_phase(cpu_cache_stats()), "idle");
  {
    set_cpu_phase("forward of unit", 1);
    auto a = torch::empty({2 * kMiB}, torch::kUInt8);
    EXPECT_EQ(cpu_peak_phase(cpu_cache_stats()), "forward of unit 1");
    set_cpu_phase("backward of unit", 12);
    auto b = torch::empty({4 * kMiB}, torch::kUInt8);
    set_cpu_phase("optimizer");
  }
  auto c = torch::empty({3 * kMiB}, torch::kUInt8);  // below the peak of 6 MiB: not a new one
  const auto s = cpu_cache_stats();
  EXPECT_EQ(cpu_peak_phase(s), "backward of unit 12");
  EXPECT_EQ(std::string(s.peak_what), "backward of unit");
  EXPECT_EQ(s.peak_index, 12);
  set_cpu_phase("");
  sb::models::reset_cpu_peak();
  EXPECT_EQ(cpu_peak_phase(cpu_cache_stats()), "");
}
