// What MFU divides by and what it counts (docs/METRICS.md "MFU", "Model FLOPs"), at 2-4 ranks:
// every rank times its GEMMs at once and all agree on the curve (the slowest rank's); the peak
// is the best size of a curve that grows until one GEMM takes over 0.3 s; a machine's cached
// peak is used without measuring; a dtype without units has no peak and so no MFU (the reason,
// not a number); a given peak measures nothing. End to end, the train task records MFU from the
// FLOPs of the objective that ran (causal LM; MLM on the masked positions; a distillation
// teacher's forward apart) and the ISA's peak beside it.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>

#include <ATen/Parallel.h>

#include "harness/core/machine.h"
#include "harness/trace/recorder.h"
#include "harness/workload.h"
#include "tests/mpi/fsdp_testlib.h"
#include "tests/mpi/mpi_main.h"
#include "workloads/data/training_source.h"
#include "workloads/models/device.h"
#include "workloads/models/dtype.h"
#include "workloads/train/peak.h"
#include "workloads/train/peak_cache.h"

using namespace sbtest;
namespace fs = std::filesystem;
using sb::train::GemmCurve;

namespace {

int ranks_on_node() {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &node);
  int n = 1;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

// SB_PEAK_CACHE for the test's duration.
struct CacheFile {
  std::string file;
  explicit CacheFile(const std::string& tag) {
    file = tag == "off" ? "off" : shared_tmpdir("peak", tag) + "/gemm_peaks.json";
    setenv("SB_PEAK_CACHE", file.c_str(), 1);
  }
  ~CacheFile() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0 && file != "off") fs::remove_all(fs::path(file).parent_path());
    unsetenv("SB_PEAK_CACHE");
  }
};

std::string key(torch::ScalarType dt) {
  return sb::train::peak_cache_key(sb::machine_now("").cpu_model, at::get_num_threads(), ranks_on_node(),
                                   sb::models::dtype_name(dt), "at::mm");
}

// A fake entry, so that nothing is measured.
void store(const std::string& file, torch::ScalarType dt, double gflops_256, double gflops_512) {
  GemmCurve c;
  c.path = "at::mm";
  c.sizes = {{256, 2, 2.0 * 256 * 256 * 256 / gflops_256 / 1e9, gflops_256},
             {512, 2, 2.0 * 512 * 512 * 512 / gflops_512 / 1e9, gflops_512}};
  const std::string k = key(dt);  // collective: every rank
  if (world_rank() == 0) sb::train::peak_cache_store(file, k, c);
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

TEST(TrainPeak, EveryRankTimesItsGemmsAtOnceAndAllAgree) {
  sb::train::GemmSweep sw;
  sw.first_n = 64, sw.max_n = 256, sw.reps_s = 1.0, sw.max_reps = 5, sw.stop_after_s = 10;
  const auto c = sb::train::measure_gemm_curve(sb::train::gemm_path("at::mm"), torch::kCPU, torch::kFloat, sw,
                                               MPI_COMM_WORLD);
  ASSERT_EQ(c.sizes.size(), 3u);
  for (std::size_t i = 0; i < c.sizes.size(); ++i) {
    const auto& s = c.sizes[i];
    EXPECT_EQ(s.n, 64 << i);
    EXPECT_EQ(s.reps, 5);  // agreed by every rank (from the slowest first call)
    // The slowest rank's: its best time and the rate of that time.
    EXPECT_NEAR(s.gflops, 2.0 * s.n * s.n * s.n / s.seconds / 1e9, 1e-9 * s.gflops);
    double v[2] = {s.gflops, s.seconds}, lo[2], hi[2];
    MPI_Allreduce(v, lo, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(v, hi, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo[0], hi[0]) << "ranks disagree on the rate of n = " << s.n;
    EXPECT_EQ(lo[1], hi[1]) << "ranks disagree on the time of n = " << s.n;
  }
  // No larger size once one GEMM took longer than stop_after_s.
  sw.stop_after_s = 0;
  EXPECT_EQ(sb::train::measure_gemm_curve(sb::train::gemm_path("at::mm"), torch::kCPU, torch::kFloat, sw,
                                          MPI_COMM_WORLD).sizes.size(), 1u);
}

TEST(TrainPeak, AMeasuredPeakIsTheBestSizeOfItsCurve) {
  CacheFile off("off");
  const auto k = sb::train::training_peaks(torch::kCPU, torch::kFloat, 0, MPI_COMM_WORLD);
  EXPECT_EQ(k.compute.source, fmt::format("measured on {} ranks at once", world_size()));
  const auto& sizes = k.compute.curve.sizes;
  ASSERT_FALSE(sizes.empty());
  double best = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(sizes[i].n, 256 << i);
    if (i + 1 < sizes.size()) EXPECT_LE(sizes[i].seconds, 0.3) << "went on after a GEMM of over 0.3 s";
    best = std::max(best, sizes[i].gflops);
  }
  EXPECT_TRUE(sizes.back().n == 4096 || sizes.back().seconds > 0.3) << "stopped early at " << sizes.back().n;
  EXPECT_EQ(k.compute.gflops, best);
  EXPECT_EQ(k.divisor, best);
  EXPECT_EQ(k.divisor_name, "fp32");
  EXPECT_TRUE(k.no_mfu.empty()) << k.no_mfu;
}

TEST(TrainPeak, AMachinesCachedPeakIsUsedWithoutMeasuring) {
  CacheFile cache("cached");
  store(cache.file, torch::kFloat, 40.0, 55.5);
  const auto k = sb::train::training_peaks(torch::kCPU, torch::kFloat, 0, MPI_COMM_WORLD);
  EXPECT_EQ(k.compute.gflops, 55.5);
  EXPECT_EQ(k.compute.n, 512);
  EXPECT_EQ(k.divisor, 55.5);
  EXPECT_EQ(k.compute.source.rfind(fmt::format("cache {} (measured 20", cache.file), 0), 0u) << k.compute.source;
  EXPECT_EQ(k.fp32.gflops, 55.5);
}

TEST(TrainPeak, ADtypeWithoutUnitsHasNoPeakAndNoMfu) {
  for (auto dt : {torch::kBFloat16, torch::kHalf}) {
    const std::string missing = sb::models::missing_fast_units(torch::kCPU, dt);
    if (!missing.empty()) {
      CacheFile cache(sb::models::dtype_name(dt));
      store(cache.file, torch::kFloat, 40.0, 55.5);  // the fp32 peak beside it, not measured
      const auto k = sb::train::training_peaks(torch::kCPU, dt, 0, MPI_COMM_WORLD);
      const std::string name = sb::models::dtype_name(dt);
      EXPECT_EQ(k.no_mfu, fmt::format("no MFU: no {} peak: the {}", name, missing));
      EXPECT_TRUE(std::isnan(k.divisor));
      EXPECT_TRUE(k.compute.curve.sizes.empty()) << "measured a dtype without units";
      EXPECT_EQ(k.fp32.gflops, 55.5);  // recorded beside it, never divided by
    }
  }
}

TEST(TrainPeak, AGivenPeakMeasuresNothing) {
  CacheFile off("off");
  const auto k = sb::train::training_peaks(torch::kCPU, torch::kBFloat16, 123.0, MPI_COMM_WORLD);
  EXPECT_EQ(k.divisor, 123.0);
  EXPECT_EQ(k.divisor_name, "given (peak_gflops)");
  EXPECT_TRUE(k.compute.curve.sizes.empty());
  EXPECT_TRUE(k.fp32.curve.sizes.empty());
  EXPECT_TRUE(k.no_mfu.empty());
}

// ---- the train task end to end ----------------------------------------------------------

namespace {

struct NoProgress final : sb::Progress {
  void begin(const std::string&, long) override {}
  void step(long, const std::string&) override {}
  void end() override {}
};

sb::Point point(const std::string& model, const std::string& teacher) {
  sb::Point p;
  for (const auto& k : sb::registered_keys()) p.set(k.key, k.default_value);
  p.set("task", std::string("train"));
  p.set("model", model);
  p.set("teacher", teacher);
  p.set("world", std::int64_t{world_size()});
  p.set("threads", std::int64_t{1});
  p.set("strategy", std::string("full_shard"));
  p.set("batch", std::int64_t{12});
  p.set("seq", std::int64_t{16});
  p.set("steps", std::int64_t{3});
  p.set("warmup", std::int64_t{1});
  p.set("eval_batches", std::int64_t{1});
  p.set("peak_gflops", 1e6);  // no measurement, and MFU far below 1
  return p;
}

void run(const sb::Point& p, sb::Recorder& rec) {
  NoProgress progress;
  sb::StopFlag stop;
  sb::RunContext ctx{p, MPI_COMM_WORLD, world_rank(), world_size(), rec, progress, stop};
  sb::find_task("train")->make()->run(ctx);
}

constexpr double kTokens = 12 * 16;  // per step

// Model FLOPs per token of each of the point's global batches, as the test counts them.
std::vector<double> flops_of_steps(const sb::Point& p, sb::models::Model& m, bool forward_only) {
  auto src = sb::data::training_source(p, m.config(), MPI_COMM_WORLD, nullptr);
  std::vector<double> f;
  for (std::int64_t s = 0; s < p.get_int("steps"); ++s) {
    const auto t = m.train_flops(src->train(s));
    f.push_back((forward_only ? sb::models::forward_flops(t).total() : t.total()) / kTokens);
  }
  return f;
}

double mean(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }

// Each step's MFU from its own FLOPs (MLM: its masked positions) and the given peak, 1e6.
void expect_mfu_from(const sb::Recorder& rec, const std::vector<double>& flops_per_token) {
  ASSERT_EQ(rec.steps().size(), flops_per_token.size());
  for (const auto& s : rec.steps()) {
    const double want = s.tokens_per_s * flops_per_token[s.step] / world_size() / 1e9 / 1e6;
    EXPECT_NEAR(s.mfu, want, 1e-12 * want) << "step " << s.step;
  }
  const double isa = rec.scalars().at("isa_peak_gflops_per_rank");
  if (std::isnan(isa)) {
    EXPECT_NE(rec.texts().at("isa_peak").rfind("unknown: ", 0), std::string::npos);
    for (const auto& s : rec.steps()) EXPECT_TRUE(std::isnan(s.mfu_isa));
    EXPECT_NE(rec.texts().at("mfu_isa_invalid").find("no ISA peak: "), std::string::npos);
  } else {
    for (const auto& s : rec.steps()) EXPECT_NEAR(s.mfu_isa, s.mfu * 1e6 / isa, 1e-9);
  }
}

}  // namespace

TEST(TrainMfu, ACausalLmCountsItsLmHeadOnEveryPosition) {
  const auto p = point("gpt2-tiny", "");
  sb::Recorder rec;
  run(p, rec);
  auto m = sb::models::make_model("gpt2-tiny");
  const auto per_token = flops_of_steps(p, *m, false);
  EXPECT_DOUBLE_EQ(rec.scalars().at("model_flops_per_token"), mean(per_token));
  EXPECT_NE(rec.texts().at("model_flops").find("causal LM"), std::string::npos);
  EXPECT_EQ(rec.scalars().count("teacher_flops_per_token"), 0u);
  expect_mfu_from(rec, per_token);
}

TEST(TrainMfu, MlmCountsItsHeadOnMaskedPositionsAndATeachersForwardApart) {
  const auto p = point("bert-tiny-1l", "bert-tiny");
  sb::Recorder rec;
  run(p, rec);
  auto student = sb::models::make_model("bert-tiny-1l"), teacher = sb::models::make_model("bert-tiny");
  const auto s = flops_of_steps(p, *student, false), t = flops_of_steps(p, *teacher, true);
  std::vector<double> both;
  for (std::size_t i = 0; i < s.size(); ++i) both.push_back(s[i] + t[i]);
  EXPECT_DOUBLE_EQ(rec.scalars().at("student_flops_per_token"), mean(s));
  EXPECT_DOUBLE_EQ(rec.scalars().at("teacher_flops_per_token"), mean(t));
  EXPECT_DOUBLE_EQ(rec.scalars().at("model_flops_per_token"), mean(both));
  // MLM: a different number of masked positions per step.
  EXPECT_NE(s[0], s[1]);
  // The MLM head is not counted on every token: below the encoder plus a head per token.
  auto all = sb::data::training_source(p, student->config(), MPI_COMM_WORLD, nullptr)->train(0);
  all.targets.fill_(1);
  EXPECT_LT(mean(s), student->train_flops(all).total() / kTokens);
  const std::string counted = rec.texts().at("model_flops");
  EXPECT_NE(counted.find("on the masked positions only"), std::string::npos) << counted;
  EXPECT_NE(counted.find("plus the teacher's forward"), std::string::npos) << counted;
  expect_mfu_from(rec, both);
}
