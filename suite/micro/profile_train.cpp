// Where a training step's time goes (docs/PERFORMANCE.md "Where the time goes"): gpt2 (124M)
// steps of the FSDP engine on one rank (no_shard) under LibTorch's profiler, every op's self
// time (its time minus its children's) summed by op class:
//   linear matmuls (mm, addmm and their backward), attention (bmm, softmax, masking),
//   layer norm, GELU, softmax/cross-entropy over the vocabulary, embedding, AdamW (our loop,
//   scope sb::adamw), the gradient norm of 16-bit gradients (sb::grad_norm), casts (to, copy),
//   other elementwise ops, and time outside any op.
// An op without a class counts for its nearest classed ancestor (aten::t under aten::linear
// is matmul work). Printed per step, beside the same steps' wall time without the profiler
// (its overhead is the difference), with the CPU model and the ISA units that decide the
// low-precision kernels.
//   mpirun --bind-to none -np 1 build/micro/micro_profile_train [--dtype fp32|bf16|fp16] [--batch 4]
//          [--seq 128] [--steps 3] [--model gpt2] [--ops N: the N ops of most self time]
//          [--callers K: those ops keyed by K callers too, "caller > op"] [--attention naive]
//          (SB_THREADS: threads, default 2)
#include <ATen/Parallel.h>
#include <mpi.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "suite/micro/bench_util.h"
#include "suite/micro/op_profile.h"
#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "workloads/comm/communicator.h"
#include "workloads/data/batches.h"
#include "workloads/data/markov.h"
#include "workloads/fsdp/engine.h"
#include "workloads/models/dtype.h"
#include "workloads/models/model.h"
#include "workloads/models/params.h"

namespace {

using sb::bench::arg;
using sb::bench::now_s;

}  // namespace

int profile(int argc, char** argv);

int main(int argc, char** argv) { return sb::bench::mpi_main(argc, argv, profile); }

int profile(int argc, char** argv) {
  const int threads = sb::bench::set_threads_from_env();
  const std::string model_name = arg(argc, argv, "--model", "gpt2");
  const std::string dtype = arg(argc, argv, "--dtype", "fp32");
  const std::int64_t B = std::atoll(arg(argc, argv, "--batch", "4").c_str());
  const std::int64_t T = std::atoll(arg(argc, argv, "--seq", "128").c_str());
  const int steps = std::atoi(arg(argc, argv, "--steps", "3").c_str());

  auto model = sb::models::make_model(model_name, arg(argc, argv, "--attention", "naive"));
  sb::comm::Communicator comm(MPI_COMM_SELF, 1);
  sb::fsdp::EngineConfig cfg;
  cfg.strategy = "no_shard";
  cfg.param_dtype = cfg.reduce_dtype = sb::models::dtype_from_name(dtype);
  cfg.loss_scaling = cfg.param_dtype == torch::kFloat16;
  cfg.adamw.total_steps = 1000;
  sb::fsdp::Engine engine(*model, comm, cfg, sb::models::init_params(model->units(), 1));
  sb::data::MarkovConfig mk;
  mk.vocab = model->config().vocab, mk.branching = 8;
  sb::data::MarkovLmBatches src(mk, B, T, 1);
  auto run = [&](std::int64_t s) {
    auto b = src.train(s);
    engine.step({b}, sb::fsdp::loss_terms(b));
  };
  run(0);  // warm-up: allocator, first touch of the optimizer state
  // The same number of steps without and then with the profiler.
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) run(1 + s);
  const double plain_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;

  std::map<std::string, double> by_class, by_op;
  double ops_ns = 0, prof_s = 0;
  sb::bench::profile_ops([&] {
    const auto t1 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) run(1 + steps + s);
    prof_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count() / steps;
  }, by_class, by_op, ops_ns, std::atoi(arg(argc, argv, "--callers", "0").c_str()));

  const auto m = sb::machine_now(sb::host_name());
  std::vector<std::string> bf16_units;
  for (const char* f : {"avx512_bf16", "amx_bf16", "avx512_fp16", "amx_int8", "avx512_vnni"})
    if (std::find(m.isa.begin(), m.isa.end(), f) != m.isa.end()) bf16_units.push_back(f);
  std::printf("# %s training B=%lld T=%lld, dtype %s, %d threads, %d profiled steps\n",
              model_name.c_str(), static_cast<long long>(B), static_cast<long long>(T),
              dtype.c_str(), threads, steps);
  std::printf("# CPU %s; low-precision units: %s\n", m.cpu_model.c_str(),
              bf16_units.empty() ? "none (no avx512_bf16, amx_bf16, avx512_fp16, amx_int8, "
                                   "avx512_vnni): bf16/fp16 matmuls have no fast kernel here"
                                 : fmt::format("{}", fmt::join(bf16_units, ", ")).c_str());
  std::printf("# step %.3f s without the profiler, %.3f s with it (overhead %.1f%%)\n", plain_s,
              prof_s, 100 * (prof_s / plain_s - 1));
  std::vector<std::pair<std::string, double>> rows(by_class.begin(), by_class.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second > b.second; });
  const double total_ns = prof_s * steps * 1e9;
  std::printf("%-34s %12s %8s\n", "op class", "ms/step", "share");
  for (const auto& [cls, ns] : rows)
    std::printf("%-34s %12.1f %7.1f%%\n", cls.c_str(), ns / steps / 1e6, 100 * ns / total_ns);
  const double outside = std::max(0.0, total_ns - ops_ns);
  std::printf("%-34s %12.1f %7.1f%%\n", "outside any op (engine, hooks)", outside / steps / 1e6,
              100 * outside / total_ns);
  const int top = std::atoi(arg(argc, argv, "--ops", "0").c_str());
  if (top > 0) {  // the ops behind the classes, by self time
    std::vector<std::pair<std::string, double>> ops(by_op.begin(), by_op.end());
    std::sort(ops.begin(), ops.end(), [](auto& a, auto& b) { return a.second > b.second; });
    std::printf("\n%-48s %12s\n", "op (self time)", "ms/step");
    for (int i = 0; i < top && i < static_cast<int>(ops.size()); ++i)
      std::printf("%-48s %12.1f\n", ops[i].first.c_str(), ops[i].second / steps / 1e6);
  }
  return 0;
}
