// Quantized inference micro-benchmark: forward latency of a batch (default bert-large,
// 8 x 128) with 2 intra-op threads, for fp32 ("none") and each format, printed beside the
// fp32 figure measured in the same run (x_fp32_latency, x_fp32_bytes).
// Usage: micro_bench_quant [--benchmark_filter=...]  (SB_QUANT_MODEL=bert-base to change model)
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/types.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "workloads/models/params.h"
#include "workloads/quant/quantizer.h"

namespace {

std::string model_name() {
  const char* m = std::getenv("SB_QUANT_MODEL");
  return m ? m : "bert-large";
}

struct Fixture {
  std::unique_ptr<sb::models::Model> model;
  sb::models::UnitTensors weights;
  sb::models::Batch batch;
};
Fixture& fixture() {
  static Fixture f = [] {
    Fixture f;
    f.model = sb::models::make_model(model_name());
    f.weights = sb::models::init_params(f.model->units(), 1);
    auto gen = at::detail::createCPUGenerator(5);
    f.batch.input_ids = torch::randint(f.model->config().vocab, {8, 128}, gen, torch::kInt64);
    return f;
  }();
  return f;
}
std::map<std::string, double>& fp32() {  // "latency", "bytes" of the baseline
  static std::map<std::string, double> m;
  return m;
}

void Forward(benchmark::State& state, const std::string& name) {
  at::set_num_threads(2);
  c10::InferenceMode guard;
  auto& f = fixture();
  auto q = sb::quant::quantize(name, *f.model, f.weights);
  f.model->logits(*q, f.batch);  // warm-up (oneDNN primitive creation, allocator)
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(f.model->logits(*q, f.batch).data_ptr());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    total += s;
  }
  const double latency = total / static_cast<double>(state.iterations());
  if (name == "none") fp32() = {{"latency", latency}, {"bytes", double(q->model_bytes())}};
  state.counters["model_MB"] = static_cast<double>(q->model_bytes()) / 1e6;
  state.counters["resident_MB"] = static_cast<double>(q->resident_bytes()) / 1e6;
  if (!fp32().empty()) {
    state.counters["x_fp32_latency"] = latency / fp32()["latency"];
    state.counters["x_fp32_bytes"] = static_cast<double>(q->model_bytes()) / fp32()["bytes"];
    if (name == "int8-dynamic") {
      const double lx = latency / fp32()["latency"], bx = q->model_bytes() / fp32()["bytes"];
      std::printf("# %s 8x128 int8-dynamic vs fp32 (same run): latency %.1f / %.1f ms = %.3f "
                  "(target <= 0.5: %s), model bytes %.3f (target <= 0.3: %s), resident %.3f\n",
                  model_name().c_str(), latency * 1e3, fp32()["latency"] * 1e3, lx,
                  lx <= 0.5 ? "PASS" : "MISS", bx, bx <= 0.3 ? "PASS" : "MISS",
                  q->resident_bytes() / fp32()["bytes"]);
    }
  }
}

const bool registered = [] {
  // fp32 first: the others divide by its figures.
  for (const char* n : {"none", "int8-dynamic", "int8-weight-channel", "bf16"})
    benchmark::RegisterBenchmark((model_name() + "_8x128/" + n).c_str(), Forward, n)
        ->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
