// The pieces of MFU's peaks that need no MPI (docs/METRICS.md "MFU"): the ISA's theoretical
// peak by the units a CPU's flags name (AMX, AVX-512 BF16, AVX2 FMA; AMD's half-width AVX-512),
// unknown when the clock is (a VM) or no rule fits; the nominal clock in a model name; the
// GEMM paths and the growing-size curve; the cache file (where, keyed by what, round trip,
// SB_PEAK_CACHE=off, a damaged file).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "workloads/train/gemm_peak.h"
#include "workloads/train/isa_peak.h"
#include "workloads/train/peak_cache.h"
#include "harness/core/check.h"
#include "tests/unit/test_tmp.h"

using namespace sb::train;

namespace {

sb::MachineInfo cpu(const std::string& vendor, int family, std::vector<std::string> isa, double ghz,
                    const std::string& model = "test CPU") {
  sb::MachineInfo m;
  m.vendor = vendor, m.cpu_family = family, m.isa = std::move(isa), m.max_clock_ghz = ghz;
  m.cpu_model = model;
  m.clock_source = "cpufreq cpuinfo_max_freq";
  return m;
}

const std::vector<std::string> kAvx2 = {"sse4_2", "avx", "avx2", "fma", "f16c"};
std::vector<std::string> with(std::vector<std::string> v, std::initializer_list<const char*> more) {
  for (auto* f : more) v.push_back(f);
  return v;
}

}  // namespace

TEST(IsaPeak, SapphireRapidsBf16IsItsAmxTiles) {
  const auto m = cpu("GenuineIntel", 6, with(kAvx2, {"avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"}), 3.8);
  const auto p = isa_peak(m, torch::kBFloat16, 2);
  EXPECT_EQ(p.flops_per_cycle, 1024);
  EXPECT_DOUBLE_EQ(p.gflops, 2 * 3.8 * 1024);
  EXPECT_EQ(p.basis, "2 cores x 3.80 GHz (cpufreq cpuinfo_max_freq) x 1024 FLOP/cycle (AMX-BF16 tiles)");
  EXPECT_TRUE(p.unknown.empty());
  EXPECT_EQ(isa_flops_per_cycle(m, torch::kFloat).flops_per_cycle, 64);
  // avx512_fp16 alone is no fp16 matrix unit (models/device.h): no fp16 figure.
  EXPECT_EQ(isa_peak(m, torch::kHalf, 2).unknown, "no fp16 matrix units (amx_fp16)");
}

TEST(IsaPeak, AmdBeforeZen5RunsAvx512AtHalfWidth) {
  const auto zen4 = cpu("AuthenticAMD", 25, with(kAvx2, {"avx512f", "avx512_bf16"}), 3.7);
  EXPECT_EQ(isa_flops_per_cycle(zen4, torch::kFloat).flops_per_cycle, 32);
  EXPECT_EQ(isa_flops_per_cycle(zen4, torch::kBFloat16).flops_per_cycle, 64);
  const auto zen5 = cpu("AuthenticAMD", 26, with(kAvx2, {"avx512f", "avx512_bf16"}), 3.7);
  EXPECT_EQ(isa_flops_per_cycle(zen5, torch::kFloat).flops_per_cycle, 64);
  EXPECT_EQ(isa_flops_per_cycle(zen5, torch::kBFloat16).flops_per_cycle, 128);
}

TEST(IsaPeak, Avx2OnlyHasNoBf16Figure) {
  const auto m = cpu("AuthenticAMD", 23, kAvx2, 3.0);
  EXPECT_DOUBLE_EQ(isa_peak(m, torch::kFloat, 4).gflops, 4 * 3.0 * 32);
  const auto b = isa_peak(m, torch::kBFloat16, 4);
  EXPECT_TRUE(std::isnan(b.gflops));
  EXPECT_EQ(b.unknown, "no bf16 units (none of avx512_bf16, amx_bf16)");
}

TEST(IsaPeak, AnUnknownClockIsSaidNotGuessed) {
  const auto m = cpu("AuthenticAMD", 25, with(kAvx2, {"avx512f", "avx512_bf16"}), 0, "AMD EPYC");
  const auto p = isa_peak(m, torch::kBFloat16, 2);
  EXPECT_TRUE(std::isnan(p.gflops));
  EXPECT_EQ(p.unknown, "the clock of CPU 'AMD EPYC' is unknown (no cpufreq in /sys and no GHz in its model "
                       "name, as in most virtual machines)");
  const auto arm = cpu("", -1, {"asimd", "sve"}, 3.0);
  EXPECT_EQ(isa_peak(arm, torch::kFloat, 2).unknown, "no FLOP-per-cycle rule for this CPU's ISA (x86 only)");
}

TEST(IsaPeak, TheModelNameStatesANominalClock) {
  EXPECT_DOUBLE_EQ(sb::model_name_clock_ghz("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"), 2.4);
  EXPECT_EQ(sb::model_name_clock_ghz("AMD EPYC"), 0.0);
  EXPECT_EQ(sb::model_name_clock_ghz("Intel(R) Xeon(R) Platinum 8480+"), 0.0);
}

TEST(GemmPeak, PathsSayWhatTheyRun) {
  EXPECT_EQ(gemm_paths().front().name, "at::mm");
  EXPECT_TRUE(gemm_path("at::mm").runs(torch::kCPU, torch::kFloat));
  EXPECT_FALSE(gemm_path("onednn_packed").runs(torch::kCPU, torch::kFloat));  // bf16 only
  try {
    gemm_path("cublas");
    ADD_FAILURE() << "no error";
  } catch (const sb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown GEMM path 'cublas'; the known ones: at::mm, onednn_packed"),
              std::string::npos) << e.what();
  }
}

TEST(GemmPeak, TheCurveGrowsUntilAGemmTakesTooLong) {
  GemmSweep sw;
  sw.first_n = 16, sw.max_n = 128, sw.reps_s = 1.0, sw.max_reps = 3, sw.stop_after_s = 10;
  const auto c = measure_gemm_curve(gemm_path("at::mm"), torch::kCPU, torch::kFloat, sw, MPI_COMM_NULL);
  ASSERT_EQ(c.sizes.size(), 4u);  // 16, 32, 64, 128
  double best = 0;
  for (std::size_t i = 0; i < c.sizes.size(); ++i) {
    EXPECT_EQ(c.sizes[i].n, 16 << i);
    EXPECT_EQ(c.sizes[i].reps, 3);  // as many as fit in 1 s, at most max_reps
    EXPECT_DOUBLE_EQ(c.sizes[i].gflops, 2.0 * c.sizes[i].n * c.sizes[i].n * c.sizes[i].n / c.sizes[i].seconds / 1e9);
    best = std::max(best, c.sizes[i].gflops);
  }
  EXPECT_EQ(c.best().gflops, best);
  sw.stop_after_s = 0;  // every GEMM takes longer than that: the first size is the last
  sw.reps_s = 0;        // and one call is longer than the repetitions' time: one repetition
  const auto one = measure_gemm_curve(gemm_path("at::mm"), torch::kCPU, torch::kFloat, sw, MPI_COMM_NULL);
  ASSERT_EQ(one.sizes.size(), 1u);
  EXPECT_EQ(one.sizes[0].reps, 1);
}

TEST(PeakCache, WhereItIs) {
  setenv("SB_PEAK_CACHE", "/x/peaks.json", 1);
  EXPECT_EQ(peak_cache_file(), "/x/peaks.json");
  setenv("SB_PEAK_CACHE", "off", 1);
  EXPECT_EQ(peak_cache_file(), "");
  unsetenv("SB_PEAK_CACHE");
  setenv("XDG_CACHE_HOME", "/c", 1);
  EXPECT_EQ(peak_cache_file(), "/c/shardbench/gemm_peaks.json");
  unsetenv("XDG_CACHE_HOME");
  const std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  setenv("HOME", "/h", 1);
  EXPECT_EQ(peak_cache_file(), "/h/.cache/shardbench/gemm_peaks.json");
  setenv("HOME", home.c_str(), 1);
}

TEST(PeakCache, EntriesRoundTripByKey) {
  const std::string dir = sb::test::tmp() + "peak_cache", file = dir + "/sub/gemm_peaks.json";
  const auto k = peak_cache_key("Xeon", 4, 2, "bf16", "at::mm");
  EXPECT_NE(k.find("Xeon | threads 4 | ranks on the node 2 | bf16 | at::mm | torch "), std::string::npos) << k;
  EXPECT_FALSE(peak_cache_lookup(file, k).has_value());  // no file yet
  GemmCurve c;
  c.path = "at::mm";
  c.sizes = {{256, 30, 0.001, 33.5}, {512, 12, 0.004, 67.1}};
  peak_cache_store(file, k, c);
  peak_cache_store(file, peak_cache_key("Xeon", 8, 1, "bf16", "at::mm"), c);  // another key beside it
  std::string when;
  const auto got = peak_cache_lookup(file, k, &when);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->path, "at::mm");
  ASSERT_EQ(got->sizes.size(), 2u);
  EXPECT_EQ(got->sizes[1].n, 512);
  EXPECT_EQ(got->sizes[1].reps, 12);
  EXPECT_EQ(got->sizes[1].gflops, 67.1);
  EXPECT_EQ(got->best().n, 512);
  EXPECT_EQ(when.size(), 20u) << when;  // 2026-12-02T10:00:00Z
  EXPECT_FALSE(peak_cache_lookup(file, peak_cache_key("Xeon", 4, 2, "fp32", "at::mm")).has_value());
  EXPECT_TRUE(peak_cache_lookup(file, peak_cache_key("Xeon", 8, 1, "bf16", "at::mm")).has_value());
  // A damaged file is no cache, and the next store starts it afresh.
  std::ofstream(file) << "{ not json";
  EXPECT_FALSE(peak_cache_lookup(file, k).has_value());
  peak_cache_store(file, k, c);
  EXPECT_TRUE(peak_cache_lookup(file, k).has_value());
  std::filesystem::remove_all(dir);
}
