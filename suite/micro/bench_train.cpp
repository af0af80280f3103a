// Training and inference throughput of the one-process reference (printed, never asserted):
// gpt2 (124M) training tokens/s at batch 4 x 128 with MFU against a dense fp32 1024^3 sgemm
// peak measured in the same run with the same threads (docs/METRICS.md), and bert-large fp32
// inference latency at batch 8 x 128. Threads: SB_THREADS (default 2).
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "workloads/data/batches.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/train/reference_trainer.h"

using namespace sb;

namespace {

int threads() {
  const char* t = std::getenv("SB_THREADS");
  return t ? std::atoi(t) : 2;
}

double g_peak_flops = 0;  // FLOP/s of the sgemm below, for MFU

void BM_Sgemm1024(benchmark::State& state) {
  at::set_num_threads(threads());
  torch::manual_seed(0);
  auto a = torch::randn({1024, 1024}), b = torch::randn({1024, 1024}), c = torch::empty({1024, 1024});
  at::mm_out(c, a, b);  // warm-up
  double best = 1e30;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // The peak is the best repetition: the hardware's dense rate, not an average with noise.
  g_peak_flops = 2.0 * 1024 * 1024 * 1024 / best;
  state.counters["GFLOP/s"] = g_peak_flops / 1e9;
  state.counters["threads"] = threads();
}
BENCHMARK(BM_Sgemm1024)->Iterations(30)->Unit(benchmark::kMillisecond);

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
  t.step({src.train(0)});  // warm-up: allocator, first-touch of optimizer state
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
  const double flops = m->train_flops_per_token(T);
  state.counters["flops/token"] = flops;
  // MFU = tokens/s x model FLOPs per token / peak FLOP/s (docs/METRICS.md).
  const double mfu = g_peak_flops > 0 ? tokens_per_s * flops / g_peak_flops : 0;
  state.counters["MFU"] = mfu;
  const auto cache = models::cpu_cache_stats();
  std::printf("# gpt2 train B=%lld T=%lld, %d threads: %.1f tokens/s, MFU %.3f against the %.1f "
              "GFLOP/s sgemm peak of this run (fp32 target >= 0.60: %s); caching CPU allocator %s\n",
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
