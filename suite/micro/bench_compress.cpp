// Compression micro-benchmarks, each figure printed beside its fp32 baseline from the same run:
//  - WireBytes: bytes one rank hands to MPI per training step for GPT-2 (124M) under
//    full_shard at world 4 (per unit: parameter all-gather of its shard + gradient
//    reduce-scatter of its flat buffer), as a ratio to fp32. Exact arithmetic (wire_bytes).
//  - Codec: compress + decompress throughput of one core on a 16M-element gradient.
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/types.h>

#include "workloads/comm/compressor.h"
#include "workloads/models/model.h"

namespace {

using sb::comm::CompressorConfig;

CompressorConfig config(const std::string& name) {
  CompressorConfig c;
  if (name == "topk1%") {
    c.name = "topk";
    c.set("ratio", 0.01);
  } else {
    c.name = name;
  }
  return c;
}

// Bytes per step per rank: sum over GPT-2's units of all-gather(shard) + reduce-scatter(flat),
// flat buffers padded to a multiple of the world size as the FSDP engine pads them.
std::int64_t step_wire_bytes(const sb::comm::Compressor& c, std::int64_t world) {
  static const auto model = sb::models::make_model("gpt2");
  std::int64_t b = 0;
  for (const auto& u : model->units()) {
    const std::int64_t n = (u.numel() + world - 1) / world * world, s = n / world;
    b += c.wire_bytes(s) + world * c.wire_bytes(s);
  }
  return b;
}

void WireBytes(benchmark::State& state, const std::string& name) {
  auto c = sb::comm::make_compressor(config(name));
  auto fp32 = sb::comm::make_compressor(config("none"));
  std::int64_t bytes = 0;
  for (auto _ : state) benchmark::DoNotOptimize(bytes = step_wire_bytes(*c, 4));
  const auto base = step_wire_bytes(*fp32, 4);
  state.counters["wire_MB"] = static_cast<double>(bytes) / 1e6;
  state.counters["fp32_MB"] = static_cast<double>(base) / 1e6;
  state.counters["x_smaller"] = static_cast<double>(base) / static_cast<double>(bytes);
}

// Throughput counts fp32 input bytes (4 n) per compress + decompress.
void Codec(benchmark::State& state, const std::string& name) {
  at::set_num_threads(1);
  const std::int64_t n = 16 << 20;
  auto x = torch::randn({n});
  auto c = sb::comm::make_compressor(config(name));
  for (auto _ : state) {
    auto wire = c->compress(x);
    benchmark::DoNotOptimize(c->decompress(wire, n).data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * 4 * n);
}

// The baseline a codec must beat to be worth it on a fast link: one copy of the buffer.
void Memcpy(benchmark::State& state) {
  at::set_num_threads(1);
  const std::int64_t n = 16 << 20;
  auto x = torch::randn({n}), y = torch::empty({n});
  for (auto _ : state) benchmark::DoNotOptimize(y.copy_(x).data_ptr());
  state.SetBytesProcessed(state.iterations() * 4 * n);
}

const bool registered = [] {
  for (const char* n : {"none", "fp16", "bf16", "int8", "topk1%"})
    benchmark::RegisterBenchmark((std::string("WireBytes/gpt2_full_shard_w4/") + n).c_str(), WireBytes, n)
        ->Iterations(1);
  benchmark::RegisterBenchmark("Codec/memcpy_baseline", Memcpy)->Unit(benchmark::kMillisecond);
  for (const char* n : {"none", "fp16", "bf16", "int8", "topk1%"})
    benchmark::RegisterBenchmark((std::string("Codec/") + n).c_str(), Codec, n)
        ->Unit(benchmark::kMillisecond)->MinTime(1.0);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
