// Pipeline bubble and activation memory (the Parallel3d issue's targets), under mpirun with
// one rank per pipeline stage:
//   mpirun -np 2 --bind-to none build/micro/micro_pp_bubble [--hidden 512] [--rows 256]
//          [--layers 4] [--steps 3]
// Each stage is `layers` x (linear hidden -> hidden, tanh) on `rows` x hidden fp32 activations
// per micro-batch, one intra-op thread per rank. For gpipe and 1f1b (interleaved: their steps
// alternate, `steps` each after a warm-up) and m = 1..8 micro-batches, the measured bubble per
// rank is (step - busy) / step (step: from a barrier to the barrier after the step, the
// same for every rank; busy: the rank's time in its stage's forward, loss and backward;
// pp_runner.h), the median over steps, printed beside (p - 1) / (m + p - 1): target within 5
// percentage points on every rank. Peak activation memory per rank is the counting
// allocator's peak during a step above the bytes live before it (parameter gradients exist
// from the warm-up, so it is the activations and the messages); target: 1f1b's at most
// p / m of gpipe's plus one micro-batch's (gpipe's / m).
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <mpi.h>

#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "suite/micro/bench_util.h"
#include "workloads/comm/communicator.h"
#include "workloads/micro/memory_tracker.h"
#include "workloads/parallel/pp_runner.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const std::int64_t hidden = std::stoll(sb::bench::arg(argc, argv, "--hidden", "512"));
  const std::int64_t rows = std::stoll(sb::bench::arg(argc, argv, "--rows", "256"));
  const int layers = std::stoi(sb::bench::arg(argc, argv, "--layers", "4"));
  const int steps = std::stoi(sb::bench::arg(argc, argv, "--steps", "3"));
  at::set_num_threads(1);
  sb::micro::MemoryTracker::install();
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  sb::Mesh mesh;
  mesh.pp = world;
  auto comm = std::make_unique<sb::comm::Communicator>(MPI_COMM_WORLD, mesh);
  sb::comm::Communicator& c = *comm;
  const int p = world, r = c.rank(sb::comm::Group::Pp);
  torch::manual_seed(1 + r);
  std::vector<torch::Tensor> w, b;
  for (int i = 0; i < layers; ++i) {
    w.push_back((torch::randn({hidden, hidden}) / std::sqrt(static_cast<double>(hidden))).set_requires_grad(true));
    b.push_back(torch::zeros({hidden}).set_requires_grad(true));
  }
  sb::parallel::PipelineStages st;
  st.act_shape = {rows, hidden};
  st.forward = [&](int, int, const torch::Tensor& x) {
    torch::Tensor y = x;
    for (int i = 0; i < layers; ++i) y = at::tanh(at::linear(y, w[i], b[i]));  // (gelu trips the counting allocator)
    return y;
  };
  st.loss = [](const torch::Tensor& y, int) { return y.pow(2).mean(); };
  if (rank == 0) {
    const auto m = sb::machine_now(sb::host_name());
    std::printf("# %d pipeline stages (one per rank) on %s (%s), %d layers of %lld x %lld per stage, "
                "%lld rows per micro-batch, 1 thread per rank, median of %d steps\n", p,
                m.cpu_model.c_str(), world > m.cores ? "oversubscribed: timings mean nothing"
                                                      : "one core per rank or more",
                layers, static_cast<long long>(hidden), static_cast<long long>(hidden),
                static_cast<long long>(rows), steps);
    std::printf("%-6s %-3s %9s %9s", "sched", "m", "formula", "step_ms");
    for (int q = 0; q < p; ++q) std::printf(" %8s", ("bubble" + std::to_string(q)).c_str());
    std::printf(" %10s %s\n", "peak_MB0", "check");
  }
  const char* scheds[] = {"gpipe", "1f1b"};
  int pass = 0, total = 0, mem_pass = 0, mem_total = 0;
  for (int m = 1; m <= 8; ++m) {
    std::vector<torch::Tensor> inputs;
    // Inputs that want a gradient: the first stage then computes its input's gradient as
    // every other stage does, so the stages are balanced (the formula assumes they are).
    for (int k = 0; k < m; ++k) inputs.push_back(torch::randn({rows, hidden}).set_requires_grad(true));
    std::map<std::string, std::vector<double>> bubble, step, peak;
    for (int s = -1; s < steps; ++s)  // s = -1: warm-up (allocates the gradients)
      for (const char* name : scheds) {
        sb::parallel::PpStepStats stats;
        MPI_Barrier(MPI_COMM_WORLD);
        const auto live0 = sb::micro::MemoryTracker::live_bytes();
        sb::micro::MemoryTracker::reset_peak();
        const double t0 = MPI_Wtime();
        sb::parallel::pipeline_step(c, sb::parallel::find_pp_schedule(name), m, 1, st, inputs,
                                    &stats);
        MPI_Barrier(MPI_COMM_WORLD);  // the step ends when its last stage does, on every rank
        stats.step_s = MPI_Wtime() - t0;
        const double extra = static_cast<double>(sb::micro::MemoryTracker::peak_bytes() - live0);
        if (s < 0) continue;
        bubble[name].push_back((stats.step_s - stats.busy_s) / stats.step_s);
        step[name].push_back(stats.step_s);
        peak[name].push_back(extra);
      }
    const double formula = static_cast<double>(p - 1) / (m + p - 1);
    double peaks[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      const std::string name = scheds[k];
      double mine[2] = {median(bubble[name]), median(peak[name])};
      std::vector<double> all(2 * p);
      MPI_Gather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      double ms = median(step[name]) * 1e3;
      MPI_Bcast(&ms, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      if (rank != 0) continue;
      bool ok = true;
      std::printf("%-6s %-3d %9.3f %9.1f", name.c_str(), m, formula, ms);
      for (int q = 0; q < p; ++q) {
        std::printf(" %8.3f", all[2 * q]);
        ok = ok && std::abs(all[2 * q] - formula) <= 0.05;
      }
      peaks[k] = all[1];
      std::printf(" %10.1f %s\n", all[1] / 1e6, ok ? "PASS" : "MISS");
      pass += ok;
      ++total;
    }
    if (rank == 0) {
      // 1f1b's activations at most p / m of gpipe's plus one micro-batch's (gpipe's / m).
      const double bound = (static_cast<double>(p) / m + 1.0 / m) * peaks[0];
      const bool ok = peaks[1] <= bound;
      mem_pass += ok;
      ++mem_total;
      std::printf("#   m=%d rank 0 peak activation bytes: 1f1b %.1f MB vs gpipe %.1f MB, bound %.1f MB %s\n",
                  m, peaks[1] / 1e6, peaks[0] / 1e6, bound / 1e6, ok ? "PASS" : "MISS");
    }
  }
  if (rank == 0)
    std::printf("# bubble within 5 points of (p-1)/(m+p-1) on every rank: %d of %d PASS; 1f1b "
                "peak activations within p/m of gpipe's + one micro-batch: %d of %d PASS\n",
                pass, total, mem_pass, mem_total);
  comm.reset();  // before MPI_Finalize
  MPI_Finalize();
  return 0;
}
