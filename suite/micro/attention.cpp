// Attention variants against sequence length (Google Benchmark):
//   build/micro/micro_attention [--benchmark_filter=...]
// GPT-2-small shapes (B=1, H=12, Dh=64, causal): forward time and the peak bytes LibTorch
// allocates during one forward (counting allocator, exact), for naive (full (T, T) scores),
// chunked (query chunks of 128, the seed's memory-efficient attention) and online (query
// and key chunks, online softmax), T = 128 .. 4096. The naive variant is the baseline each
// figure is compared with, measured in the same run; a check after the timed loop reports
// the largest difference from naive.
#include <ATen/Parallel.h>
#include <cstdio>
#include <map>
#include <string>

#include <benchmark/benchmark.h>
#include <torch/types.h>

#include "workloads/micro/memory_tracker.h"
#include "workloads/models/attention.h"

namespace {

struct Shape {
  std::int64_t B = 1, H = 12, Dh = 64;
};
std::map<std::pair<std::string, std::int64_t>, std::pair<double, double>> g_result;  // (s, bytes)

void run_attention(benchmark::State& st, std::string variant) {
  const std::int64_t T = st.range(0);
  const Shape s;
  torch::manual_seed(0);
  auto q = torch::randn({s.B, s.H, T, s.Dh}), k = torch::randn({s.B, s.H, T, s.Dh}),
       v = torch::randn({s.B, s.H, T, s.Dh});
  auto attn = sb::models::make_attention(variant, 128);
  sb::models::AttentionMask mask;
  mask.causal = true;
  torch::NoGradGuard no_grad;
  attn->forward(q, k, v, mask);  // warm-up
  for (auto _ : st) benchmark::DoNotOptimize(attn->forward(q, k, v, mask));
  // Peak bytes of one forward, beyond the inputs (after the timed loop).
  sb::micro::MemoryTracker::reset_peak();
  const auto base = sb::micro::MemoryTracker::live_bytes();
  auto out = attn->forward(q, k, v, mask);
  const double peak = static_cast<double>(sb::micro::MemoryTracker::peak_bytes() - base);
  auto ref = sb::models::make_attention("naive", 128)->forward(q, k, v, mask);
  st.counters["peak_MiB"] = peak / (1 << 20);
  st.counters["max_abs_diff_vs_naive"] = (out - ref).abs().max().item<double>();
  st.counters["T"] = static_cast<double>(T);
  g_result[{variant, T}] = {0, peak};
}

}  // namespace

int main(int argc, char** argv) {
  sb::micro::MemoryTracker::install();
  at::set_num_threads(2);
  for (const auto& [name, doc] : sb::models::attention_variants())
    benchmark::RegisterBenchmark(("attention/" + name).c_str(), run_attention, name)
        ->RangeMultiplier(2)
        ->Range(128, 4096)
        ->Unit(benchmark::kMillisecond)
        ->MeasureProcessCPUTime()
        ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::printf("\n# peak forward memory vs naive (same run)\n%-10s %6s %12s %12s %8s\n", "variant",
              "T", "naive_MiB", "variant_MiB", "ratio");
  for (const auto& [key, r] : g_result) {
    if (key.first == "naive") continue;
    auto base = g_result.find({"naive", key.second});
    if (base == g_result.end()) continue;
    std::printf("%-10s %6lld %12.1f %12.1f %8.3f\n", key.first.c_str(),
                static_cast<long long>(key.second), base->second.second / (1 << 20),
                r.second / (1 << 20), r.second / base->second.second);
  }
  return 0;
}
