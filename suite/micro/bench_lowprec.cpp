// Low-precision training against fp32 on one rank (the Lowprec issue's training targets),
// printed, never asserted: gpt2 (124M) FSDP-engine steps (no_shard) in fp32 and in the low
// dtype, interleaved round by round (this machine's speed drifts 10-25% within minutes, so a
// ratio is only honest between neighbouring steps), each dtype's tokens/s and MFU against the
// GEMM peak of the dtype its matmuls ran in, measured in this run the way the train task
// measures it (at::mm at growing sizes, train/gemm_peak.h, docs/METRICS.md "MFU").
//   mpirun --bind-to none -np 1 build/micro/micro_bench_lowprec [--dtype bf16|fp16] [--model gpt2]
//          [--batch 4] [--seq 128] [--rounds 3] [--attention naive]   (SB_THREADS, default 2)
// Targets: low / fp32 tokens/s >= 3, low MFU >= 0.5, fp32 MFU >= 0.6; on a CPU without the low
// dtype's units the targets are not judged (its matmuls have no fast kernel) and it says so.
// The eager PyTorch comparison is suite/micro/eager_gpt2.py, run back to back with this.
#include <ATen/Parallel.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "suite/micro/bench_util.h"
#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "workloads/comm/communicator.h"
#include "workloads/data/batches.h"
#include "workloads/data/markov.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/device.h"
#include "workloads/models/dtype.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"
#include "workloads/train/gemm_peak.h"

namespace {

using sb::bench::arg;
using sb::bench::now_s;

// GFLOP/s: the train task's peak on the host (at::mm at growing sizes, this process alone).
double gemm_peak_gflops(torch::ScalarType dtype) {
  const auto c = sb::train::measure_gemm_curve(sb::train::gemm_path("at::mm"), torch::kCPU, dtype,
                                               sb::train::default_sweep(torch::kCPU), MPI_COMM_NULL);
  return c.best().gflops;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Run {
  torch::ScalarType dtype;
  std::unique_ptr<sb::fsdp::Engine> engine;
  std::vector<double> step_s;
  double peak_gflops = 0;
};

int bench(int argc, char** argv) {
  const int threads = sb::bench::set_threads_from_env();
  const std::string model_name = arg(argc, argv, "--model", "gpt2");
  const auto low = sb::models::dtype_from_name(arg(argc, argv, "--dtype", "bf16"));
  const std::int64_t B = std::atoll(arg(argc, argv, "--batch", "4").c_str());
  const std::int64_t T = std::atoll(arg(argc, argv, "--seq", "128").c_str());
  const int rounds = std::atoi(arg(argc, argv, "--rounds", "3").c_str());
  const std::string attention = arg(argc, argv, "--attention", "naive");

  const auto m = sb::machine_now(sb::host_name());
  const std::string missing = sb::models::missing_fast_units(torch::kCPU, low);
  std::printf("# %s training B=%lld T=%lld, attention %s, %d threads, fp32 vs %s interleaved, "
              "%d rounds\n# CPU %s; %s\n",
              model_name.c_str(), static_cast<long long>(B), static_cast<long long>(T),
              attention.c_str(), threads, sb::models::dtype_name(low).c_str(), rounds,
              m.cpu_model.c_str(), missing.empty() ? "it has the low dtype's matrix units"
                                                   : missing.c_str());

  auto model = sb::models::make_model(model_name, attention);
  sb::comm::Communicator comm(MPI_COMM_SELF, 1);
  std::vector<Run> runs(2);
  runs[0].dtype = torch::kFloat32, runs[1].dtype = low;
  for (auto& r : runs) {
    sb::fsdp::EngineConfig cfg;
    cfg.strategy = "no_shard";
    cfg.param_dtype = cfg.reduce_dtype = r.dtype;
    cfg.loss_scaling = r.dtype == torch::kFloat16;
    cfg.adamw.total_steps = 1000;
    r.engine = std::make_unique<sb::fsdp::Engine>(*model, comm, cfg,
                                                  sb::models::init_params(model->units(), 1));
    // A CPU without the units runs a low GEMM at ~1 GFLOP/s: it has no peak in that dtype and
    // so no MFU (NaN, printed as such), as the train task says.
    r.peak_gflops = r.dtype == torch::kFloat32 || missing.empty() ? gemm_peak_gflops(r.dtype)
                                                                  : std::nan("");
  }
  sb::data::MarkovConfig mk;
  mk.vocab = model->config().vocab, mk.branching = 8;
  sb::data::MarkovLmBatches src(mk, B, T, 1);
  auto step = [&](Run& r, std::int64_t s) {
    auto b = src.train(s);
    const double t0 = now_s();
    r.engine->step({b}, sb::fsdp::loss_terms(b));
    return now_s() - t0;
  };
  const auto b0 = src.train(0);
  for (auto& r : runs) step(r, 0);  // warm-up: allocator, first touch of optimizer state
  for (int i = 0; i < rounds; ++i)
    for (auto& r : runs) r.step_s.push_back(step(r, 1 + i));

  const double flops = model->train_flops(b0).total() / static_cast<double>(B * T);  // per token
  double tps[2], mfu[2];
  std::printf("%-6s %10s %12s %14s %8s\n", "dtype", "step_s", "tokens/s", "peak GFLOP/s", "MFU");
  for (int i = 0; i < 2; ++i) {
    const double s = median(runs[i].step_s);
    tps[i] = double(B * T) / s;
    // MFU = tokens/s x model FLOPs per token / peak FLOP/s (docs/METRICS.md).
    mfu[i] = tps[i] * flops / (runs[i].peak_gflops * 1e9);
    std::printf("%-6s %10.3f %12.1f %14.1f %8.3f\n", sb::models::dtype_name(runs[i].dtype).c_str(),
                s, tps[i], runs[i].peak_gflops, mfu[i]);
  }
  const double ratio = tps[1] / tps[0];
  std::printf("# %s / fp32 tokens/s %.2fx (median steps); GEMM peaks %s / fp32 %.2fx\n",
              sb::models::dtype_name(low).c_str(), ratio, sb::models::dtype_name(low).c_str(),
              runs[1].peak_gflops / runs[0].peak_gflops);
  std::printf("# target fp32 MFU >= 0.60: %s\n", mfu[0] >= 0.6 ? "PASS" : "MISS");
  if (!missing.empty()) {
    std::printf("# low-precision targets not judged: the %s\n", missing.c_str());
    return 0;
  }
  std::printf("# target %s >= 3x fp32 tokens/s: %s; %s MFU >= 0.50: %s\n",
              sb::models::dtype_name(low).c_str(), ratio >= 3 ? "PASS" : "MISS",
              sb::models::dtype_name(low).c_str(), mfu[1] >= 0.5 ? "PASS" : "MISS");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return sb::bench::mpi_main(argc, argv, bench); }
