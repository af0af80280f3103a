// Tensor parallelism's activation memory and step time per rank (the Parallel3d issue's
// gpt2-medium target), under mpirun with 2 ranks:
//   mpirun -np 2 --bind-to none build/micro/micro_tp_memory [--model gpt2-medium] [--batch 1]
//          [--seq 1024] [--dtype fp32]
// The same global batch (batch x seq tokens) three ways, each rank one intra-op thread:
//   1 rank     every rank runs the whole model on the whole batch alone (the baseline)
//   tp 2       Megatron's tensor parallelism (models/tensor_parallel.h)
//   tp 2 + sp  with tp_sequence_parallel (LayerNorm regions split by rows)
// Activation memory = the bytes live at the end of the forward above those live before it (what
// autograd keeps for backward, the loss's included), counted by the exact allocator; peak = the
// most live during forward + backward above the same start. Printed beside the memory model's
// activation terms (fsdp::predict_memory) and the ratio to the 1-rank run; target: tp 2 + sp at
// most 0.55 of the 1-rank run's activations. The 1-rank loss is the chunked LM head
// (models::linear_cross_entropy), which forms the tied weight's gradient (V x d) in the forward:
// it counts in that run's activations. Modes alternate `rounds` times (the first pays the first
// touch of fresh memory); activations are the median, step times the fastest.
#include <algorithm>
#include <memory>
#include <cstdio>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "suite/micro/bench_util.h"
#include "workloads/comm/communicator.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/micro/memory_tracker.h"
#include "workloads/models/dtype.h"
#include "workloads/models/family.h"
#include "workloads/models/params.h"
#include "workloads/parallel/tp_layers.h"

namespace {

using sb::micro::MemoryTracker;

struct Sample {
  double act = 0, peak = 0, step_s = 0, predicted = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One forward + backward of `preset` on batch, sharded as tp says (size 1: the whole model).
Sample measure(const std::string& preset, const sb::models::Batch& batch, torch::ScalarType dt,
               sb::comm::Communicator* c, bool sp) {
  auto model = sb::models::make_model(preset);
  if (c) model->set_tensor_parallel(sb::parallel::tensor_parallel(*c, sp));
  auto values = sb::models::init_params(model->units(), 1234);
  for (auto& unit : values)
    for (auto& t : unit) t = t.to(dt);
  sb::models::PersistentParams params(std::move(values));
  sb::fsdp::MemoryInputs in;
  in.units = model->units();
  in.model = model->config();
  in.tp = c ? c->size(sb::comm::Group::Tp) : 1;
  in.sequence_parallel = sp;
  in.param_dtype = dt;
  in.rows = batch.input_ids.size(0);
  in.seq = batch.input_ids.size(1);
  in.loss_rows = in.rows * in.seq;
  in.loss_classes = model->config().vocab;
  const auto pm = sb::fsdp::predict_memory(in);
  Sample s;
  // The one-process loss is the chunked LM head: no whole logits, but the tied weight's
  // gradient formed in the forward (V x d), which the memory model does not count.
  // At the memory model's moment: the first unit's backward's term too, when it is that one.
  s.predicted = static_cast<double>(pm.activation_layers + pm.activation_attention +
                                    (c ? pm.activation_head : 0) + pm.first_unit_grad);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto live0 = MemoryTracker::live_bytes();
  MemoryTracker::reset_peak();
  const double t0 = MPI_Wtime();
  auto loss = model->loss(params, batch);
  s.act = static_cast<double>(MemoryTracker::live_bytes() - live0);
  loss.backward();
  s.step_s = MPI_Wtime() - t0;
  s.peak = static_cast<double>(MemoryTracker::peak_bytes() - live0);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::string preset = sb::bench::arg(argc, argv, "--model", "gpt2-medium");
  const std::int64_t B = std::stoll(sb::bench::arg(argc, argv, "--batch", "1"));
  const std::int64_t T = std::stoll(sb::bench::arg(argc, argv, "--seq", "1024"));
  const int rounds = std::stoi(sb::bench::arg(argc, argv, "--rounds", "2"));
  const auto dt = sb::models::dtype_from_name(sb::bench::arg(argc, argv, "--dtype", "fp32"));
  at::set_num_threads(1);
  MemoryTracker::install();
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  sb::Mesh mesh;
  mesh.tp = world;
  auto owned = std::make_unique<sb::comm::Communicator>(MPI_COMM_WORLD, mesh);  // freed before MPI_Finalize
  sb::comm::Communicator& comm = *owned;
  const auto cfg = sb::models::preset_config(preset);
  auto gen = at::detail::createCPUGenerator(7);
  auto tok = torch::randint(cfg.vocab, {B, T + 1}, gen, torch::kInt64);
  sb::models::Batch batch;
  batch.input_ids = tok.narrow(1, 0, T).contiguous();
  batch.targets = tok.narrow(1, 1, T).contiguous();
  // A masked LM (BERT) has targets at the masked positions only (about 15%).
  if (sb::models::family(cfg.family).objective == sb::models::Objective::MaskedLm)
    batch.targets = torch::where(torch::rand({B, T}, gen) < 0.15, batch.targets,
                                 torch::full_like(batch.targets, -100));
  std::vector<std::vector<Sample>> got(3);
  for (int r = 0; r < rounds; ++r)
    for (int m = 0; m < 3; ++m) got[m].push_back(measure(preset, batch, dt, m == 0 ? nullptr : &comm, m == 2));
  if (rank == 0) {
    const auto mi = sb::machine_now(sb::host_name());
    std::printf("# %s, batch %lld x seq %lld, %s, %d ranks (tp = %d), 1 thread per rank, on %s [%s] "
                "(%s), median of %d round(s)\n", preset.c_str(), static_cast<long long>(B),
                static_cast<long long>(T), sb::models::dtype_name(dt).c_str(), world, world,
                mi.cpu_model.c_str(), fmt::format("{}", fmt::join(mi.isa, " ")).c_str(),
                world > mi.cores ? "oversubscribed: timings mean nothing" : "one core per rank or more",
                rounds);
    std::printf("%-10s %14s %14s %14s %12s %10s\n", "mode", "activations_MB", "vs_1_rank",
                "predicted_MB", "peak_MB", "step_s");
    double base = 0;
    for (int m = 0; m < 3; ++m) {
      std::vector<double> a, p, t, pr;
      for (const auto& s : got[m]) a.push_back(s.act), p.push_back(s.peak), t.push_back(s.step_s), pr.push_back(s.predicted);
      if (m == 0) base = median(a);
      const std::string name = m == 0 ? "1 rank" : fmt::format("tp {}{}", world, m == 2 ? " + sp" : "");
      std::printf("%-10s %14.1f %14.3f %14.1f %12.1f %10.2f\n", name.c_str(), median(a) / 1e6,
                  median(a) / base, median(pr) / 1e6, median(p) / 1e6, *std::min_element(t.begin(), t.end()));
    }
    std::vector<double> a;
    for (const auto& s : got[2]) a.push_back(s.act);
    std::printf("# tp + sp activations / 1 rank = %.3f (target <= 0.55): %s\n", median(a) / base,
                median(a) / base <= 0.55 ? "PASS" : "MISS");
  }
  owned.reset();
  MPI_Finalize();
  return 0;
}
