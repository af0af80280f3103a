// Training and inference throughput of the one-process reference (printed, never asserted):
// the GEMM peak curve (size -> GFLOP/s) of every dtype this CPU has units for through every
// GEMM path that runs it, measured as the train task measures its peak (train/gemm_peak.h,
// docs/METRICS.md "MFU"), with the ISA's theoretical peak; gpt2 (124M) training tokens/s at
// batch 4 x 128 with MFU against the fp32 peak of that curve; bert-large fp32 inference latency
// at batch 8 x 128. Threads: SB_THREADS (default 2).
//   build/micro/micro_bench_train [--benchmark_filter=GemmPeaks]
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "harness/core/machine.h"
#include "workloads/data/batches.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/device.h"
#include "workloads/models/dtype.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/train/gemm_peak.h"
#include "workloads/train/isa_peak.h"
#include "workloads/train/reference_trainer.h"

using namespace sb;

namespace {

int threads() {
  const char* t = std::getenv("SB_THREADS");
  return t ? std::atoi(t) : 2;
}

double g_peak_flops = 0;  // FLOP/s: the best of the fp32 at::mm curve below, for MFU

// One line per (dtype, path): "n GFLOP/s" for each size, the size that won, and the ISA peak.
void BM_GemmPeaks(benchmark::State& state) {
  at::set_num_threads(threads());
  torch::manual_seed(0);
  const auto m = sb::machine_now("");
  std::printf("# GEMM peak curves, %d threads, CPU %s (docs/METRICS.md \"MFU\")\n", threads(), m.cpu_model.c_str());
  for (auto _ : state) {
    for (auto dt : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      const std::string name = models::dtype_name(dt);
      const std::string missing = dt == torch::kFloat ? "" : models::missing_fast_units(torch::kCPU, dt);
      const auto isa = train::isa_peak(m, dt, std::min<double>(threads(), m.physical_cores));
      const std::string isa_text = isa.unknown.empty() ? fmt::format("{:.1f} GFLOP/s = {}", isa.gflops, isa.basis)
                                                       : "unknown: " + isa.unknown;
      if (!missing.empty()) {
        std::printf("%-5s no peak: the %s\n", name.c_str(), missing.c_str());
        continue;
      }
      for (const auto& path : train::gemm_paths()) {
        if (!path.runs(torch::kCPU, dt)) continue;
        const auto c = train::measure_gemm_curve(path, torch::kCPU, dt, train::default_sweep(torch::kCPU), MPI_COMM_NULL);
        std::string line;
        for (const auto& s : c.sizes) line += fmt::format("  {}:{:.1f}", s.n, s.gflops);
        std::printf("%-5s %-14s n:GFLOP/s%s  -> peak %.1f at %lld; ISA peak %s\n", name.c_str(), path.name.c_str(),
                    line.c_str(), c.best().gflops, static_cast<long long>(c.best().n), isa_text.c_str());
        state.counters[name + " " + path.name + " GFLOP/s"] = c.best().gflops;
        if (dt == torch::kFloat && path.name == "at::mm") g_peak_flops = c.best().gflops * 1e9;
      }
    }
  }
}
BENCHMARK(BM_GemmPeaks)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_Gpt2Train(benchmark::State& state) {
  at::set_num_threads(threads());
  const std::int64_t B = 4, T = 128;
  auto m = models::make_model("gpt2", "naive");
  train::TrainConfig cfg;
  cfg.adamw.total_steps = 1000;
  cfg.threads = threads();
  train::ReferenceTrainer t(*m, cfg);
  data::MarkovConfig mk;
  mk.vocab = 50257, mk.branching = 8;
  data::MarkovLmBatches src(mk, B, T, 1);
  const auto b0 = src.train(0);
  t.step({b0});  // warm-up: allocator, first-touch of optimizer state
  std::int64_t s = 1;
  double fwd = 0, bwd = 0, opt = 0, wall = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = t.step({src.train(s++)});
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fwd += r.forward_s, bwd += r.backward_s, opt += r.optimizer_s;
  }
  const double steps = static_cast<double>(state.iterations());
  const double tokens_per_s = static_cast<double>(B * T) * steps / wall;
  state.counters["tokens/s"] = tokens_per_s;
  state.counters["fwd_s"] = fwd / steps, state.counters["bwd_s"] = bwd / steps, state.counters["opt_s"] = opt / steps;
  const double flops = m->train_flops(b0).total() / static_cast<double>(B * T);  // per token
  state.counters["flops/token"] = flops;
  // MFU = tokens/s x model FLOPs per token / peak FLOP/s (docs/METRICS.md).
  const double mfu = g_peak_flops > 0 ? tokens_per_s * flops / g_peak_flops : 0;
  state.counters["MFU"] = mfu;
  const auto cache = models::cpu_cache_stats();
  std::printf("# gpt2 train B=%lld T=%lld, %d threads: %.1f tokens/s, MFU %.3f against the %.1f "
              "GFLOP/s fp32 GEMM peak of this run (fp32 target >= 0.60: %s); caching CPU allocator %s\n",
              static_cast<long long>(B), static_cast<long long>(T), threads(), tokens_per_s, mfu,
              g_peak_flops / 1e9, mfu >= 0.6 ? "PASS" : "MISS",
              cache.installed ? "on" : "off (SB_CPU_ALLOCATOR=default)");
}
BENCHMARK(BM_Gpt2Train)->Iterations(3)->Unit(benchmark::kSecond)->UseRealTime();

void BM_BertLargeInfer(benchmark::State& state) {
  at::set_num_threads(threads());
  const std::int64_t B = 8, T = 128;
  auto m = models::make_model("bert-large", "naive");
  models::PersistentParams p(models::init_params(m->units(), 1), false);
  models::Batch b;
  b.input_ids = torch::randint(0, 30522, {B, T}, torch::kLong);
  b.attention_mask = torch::ones({B, T}, torch::kLong);
  torch::NoGradGuard ng;
  m->classify(p, b);  // warm-up
  double wall = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(m->classify(p, b));
    wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const double lat = wall / static_cast<double>(state.iterations());
  state.counters["samples/s"] = static_cast<double>(B) / lat;
  state.counters["latency_ms"] = lat * 1e3;
  std::printf("# bert-large fp32 inference B=%lld T=%lld, %d threads: %.1f ms per batch\n",
              static_cast<long long>(B), static_cast<long long>(T), threads(), lat * 1e3);
}
BENCHMARK(BM_BertLargeInfer)->Iterations(5)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
