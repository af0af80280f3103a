// Quantized inference micro-benchmark: forward latency of a batch (default bert-large,
// 8 x 128) with 2 intra-op threads, for fp32 ("none") and each format, printed beside the
// fp32 figure measured in the same run (x_fp32_latency, x_fp32_bytes). Each format computes in
// the dtype quant_compute = "auto" gives it on this CPU (bf16 only with bf16 units); the
// summary names the fastest mode against the Lowprec targets (<= 0.23x fp32 latency, int8
// bytes <= 0.26x) or, when the CPU lacks the units those targets assume, says which instead
// of PASS/MISS.
// Usage: micro_bench_quant [--benchmark_filter=...]  (SB_QUANT_MODEL=bert-base to change model;
// SB_QUANT_OPS=N prints each format's N ops of most self time in one profiled forward;
// SB_QUANT_ATTENTION=sdpa runs another attention variant than the infer task's default, naive)
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/types.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>

#include "workloads/models/device.h"
#include "workloads/models/params.h"
#include "suite/micro/op_profile.h"
#include "workloads/quant/calibration.h"
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
    const char* attention = std::getenv("SB_QUANT_ATTENTION");  // the attention key's variants
    f.model = sb::models::make_model(model_name(), attention ? attention : "naive");
    f.weights = sb::models::init_params(f.model->units(), 1);
    auto gen = at::detail::createCPUGenerator(5);
    f.batch.input_ids = torch::randint(f.model->config().vocab, {8, 128}, gen, torch::kInt64);
    return f;
  }();
  return f;
}
sb::quant::Int8EngineChoice& engine() {  // int8-dynamic's, chosen before its weights are packed
  static sb::quant::Int8EngineChoice e;
  return e;
}
std::map<std::string, double>& fp32() {  // "latency", "bytes" of the baseline
  static std::map<std::string, double> m;
  return m;
}
struct Figure {
  double x_latency = 0, x_bytes = 0;
  std::string compute;
};
std::map<std::string, Figure>& figures() {  // per format, against the same run's fp32
  static std::map<std::string, Figure> m;
  return m;
}

// The n ops of most self time in one forward (after the timed ones), ms.
void print_ops(const std::string& name, int n, const std::function<void()>& forward) {
  std::map<std::string, double> by_class, by_op;
  double ops_ns = 0;
  sb::bench::profile_ops(forward, by_class, by_op, ops_ns);
  std::vector<std::pair<double, std::string>> top;
  for (const auto& [op, ns] : by_op) top.emplace_back(ns, op);
  std::sort(top.rbegin(), top.rend());
  std::printf("# %s: one profiled forward, %.1f ms in ops; self time:\n", name.c_str(), ops_ns / 1e6);
  for (int i = 0; i < n && i < static_cast<int>(top.size()); ++i)
    std::printf("#   %8.1f ms  %s\n", top[i].first / 1e6, top[i].second.c_str());
}

void Forward(benchmark::State& state, const std::string& name) {
  at::set_num_threads(2);
  c10::InferenceMode guard;
  auto& f = fixture();
  std::string why;
  const auto compute = sb::quant::compute_dtype(name, "auto", torch::kCPU, &why);
  if (name == "int8-dynamic")  // the engine the infer task would pick: timed on this model's linears
    engine() = sb::quant::select_int8_engine(
        "auto", sb::quant::linear_shapes(f.model->units(), f.batch.input_ids.numel()));
  // int8-static: ranges from one other batch (the infer task's default observer and skip rule).
  std::optional<sb::quant::Calibration> cal;
  if (sb::quant::needs_calibration(name)) {
    auto gen = at::detail::createCPUGenerator(6);
    sb::models::Batch b;
    b.input_ids = torch::randint(f.model->config().vocab, {8, 128}, gen, torch::kInt64);
    sb::quant::CalibrationOptions o;
    o.observer = "percentile";
    o.skip_error = 0.1;
    o.observer_options.levels = sb::quant::host_int8_units().full_range ? 255 : 127;
    cal = sb::quant::calibrate(*f.model, f.weights, {b}, o);
  }
  auto q = sb::quant::quantize(name, *f.model, f.weights, compute, cal ? &*cal : nullptr);
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
  if (const char* ops = std::getenv("SB_QUANT_OPS")) print_ops(name, std::atoi(ops), [&] { f.model->logits(*q, f.batch); });
  if (name == "none") fp32() = {{"latency", latency}, {"bytes", double(q->model_bytes())}};
  state.counters["model_MB"] = static_cast<double>(q->model_bytes()) / 1e6;
  state.counters["resident_MB"] = static_cast<double>(q->resident_bytes()) / 1e6;
  if (!fp32().empty()) {
    state.counters["x_fp32_latency"] = latency / fp32()["latency"];
    state.counters["x_fp32_bytes"] = static_cast<double>(q->model_bytes()) / fp32()["bytes"];
    figures()[name] = {latency / fp32()["latency"], q->model_bytes() / fp32()["bytes"],
                       std::string(compute == torch::kFloat ? "fp32" : compute == torch::kHalf ? "fp16" : "bf16") +
                           " (" + why + ")"};
  }
}

// The fastest format against the targets, or why a target does not apply on this CPU.
void summary() {
  const torch::Device cpu(torch::kCPU);
  const std::string no_int8 = sb::models::missing_fast_units(cpu, torch::kChar);
  const std::string no_bf16 = sb::models::missing_fast_units(cpu, torch::kBFloat16);
  std::string best;
  for (const auto& [name, fig] : figures()) {
    std::printf("# %s 8x128 %-20s latency %.3fx fp32, bytes %.3fx, compute %s\n",
                model_name().c_str(), name.c_str(), fig.x_latency, fig.x_bytes, fig.compute.c_str());
    if (name != "none" && (best.empty() || fig.x_latency < figures()[best].x_latency)) best = name;
  }
  if (!engine().engine.empty())
    std::printf("# int8-dynamic engine: %s (%s); %s\n", engine().engine.c_str(), engine().why.c_str(),
                sb::quant::host_int8_units().note.c_str());
  if (best.empty()) return;
  const Figure& b = figures()[best];
  const bool units = no_int8.empty() || no_bf16.empty();
  std::printf("# fastest low-precision mode: %s at %.3fx fp32 latency (same run); target <= 0.23: %s\n",
              best.c_str(), b.x_latency,
              units ? (b.x_latency <= 0.23 ? "PASS" : "MISS")
                    : ("not judged: the " + no_int8 + "; the " + no_bf16).c_str());
  if (figures().count("int8-dynamic"))
    std::printf("# int8-dynamic model bytes %.3fx fp32; target <= 0.26: %s\n",
                figures()["int8-dynamic"].x_bytes, figures()["int8-dynamic"].x_bytes <= 0.26 ? "PASS" : "MISS");
}

const bool registered = [] {
  // fp32 first: the others divide by its figures.
  for (const char* n : {"none", "int8-static", "int8-dynamic", "int8-weight-channel", "bf16", "fp16"})
    benchmark::RegisterBenchmark((model_name() + "_8x128/" + n).c_str(), Forward, n)
        ->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  summary();
  benchmark::Shutdown();
  return 0;
}
