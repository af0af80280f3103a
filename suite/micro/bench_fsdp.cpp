// FSDP strong scaling, exposed communication and model-state memory, each printed beside its
// baseline measured in the same run (an MPI program, not a Google Benchmark one: it needs
// every rank). Run with 2 ranks for the scaling figures (docs/FSDP.md "Benchmark"):
//   mpirun -np 2 build/micro/micro_bench_fsdp [model] [rows-per-rank] [seq] [steps] [strategies]
// strategies: comma-separated strategy+progress[+compression preset]; default
// full_shard+poll,full_shard+inline,no_shard+inline (poll and inline are what the train task's
// comm_progress = "auto" picks), e.g. full_shard+inline+hybrid for compressed collectives.
// Baseline: rank 0 alone (MPI_COMM_SELF, no_shard: no communication) on the same per-rank
// batch, while the other ranks wait without spinning, before and after every strategy on all
// ranks; a strategy's scaling is against the faster of the two baselines beside it.
// Scaling = global tokens/s on N ranks / tokens/s on 1 rank. One thread per rank.
// Ceiling: every rank runs the 1-rank baseline at the same time (no communication at all);
// their summed tokens/s over the 1-rank figure is the most any strategy can reach on this
// machine (shared memory bandwidth, caches and the hypervisor), printed beside the scaling.
// Columns: fwd/bwd/opt_s as the engine times them (bwd includes waiting for gradient
// reductions), comm_s = seconds the communication thread spent inside collectives,
// exposed% = time the compute thread was blocked on communication / step time.
// SB_DTYPE=bf16|fp16 (default fp32): the compute dtype of every run, baseline and ceiling
// included (the Lowprec issue: bf16 keeps scaling >= 0.95 of the ceiling); the header says
// when the CPU lacks that dtype's units.
// Targets (issue #4, printed at the end for every configuration; issue #4 set them for
// full_shard): scaling >= 1.85 at 2 ranks, exposed communication <= 5% of the step.
#include <ATen/Parallel.h>
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include <mpi.h>
#include <torch/types.h>

#include "workloads/comm/communicator.h"
#include "workloads/comm/policy.h"
#include "workloads/data/batches.h"
#include "workloads/fsdp/engine.h"
#include "workloads/fsdp/memory_model.h"
#include "workloads/models/cpu_allocator.h"
#include "workloads/models/device.h"
#include "workloads/models/dtype.h"
#include "workloads/models/params.h"

namespace {

// A barrier that sleeps instead of spinning (an idle rank must not take a core).
void quiet_barrier(MPI_Comm c) {
  MPI_Request r;
  MPI_Ibarrier(c, &r);
  int done = 0;
  while (!done) {
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

torch::ScalarType compute_dtype() {
  const char* d = std::getenv("SB_DTYPE");
  return sb::models::dtype_from_name(d ? d : "fp32");
}

struct Figures {
  double tokens_per_s = 0, exposed_frac = 0, step_s = 0, min_step_s = 0, max_step_s = 0;
  double fwd_s = 0, bwd_s = 0, opt_s = 0, comm_busy_s = 0;  // of the median step, slowest rank
  double exp_fwd_s = 0, exp_opt_s = 0, gather_wait_s = 0;
  std::uint64_t model_state = 0, peak = 0;
};

// `steps` timed steps after 1 warm-up step; a step's figures are the slowest rank's, and the
// row reported is the median step by wall time (this VM has minute-long slow spells that a
// mean over 3-5 steps passes on; min and max are printed beside it).
// strategy: a strategy name, optionally with "+<progress>" (thread, poll, inline:
// Communicator::set_progress; default thread) and then "+<compression preset>" (default none).
Figures measure(sb::models::Model& model, MPI_Comm world, const std::string& strategy,
                std::int64_t rows, std::int64_t T, int steps) {
  // Each measurement starts from an empty CPU block cache: the previous one's block sizes
  // are not this one's (its warm-up step fills the cache again).
  sb::models::release_cpu_cache();
  sb::comm::Communicator comm(world, 0);
  std::vector<std::string> parts;
  std::stringstream ss(strategy);
  for (std::string p; std::getline(ss, p, '+');) parts.push_back(p);
  if (parts.size() > 1) comm.set_progress(sb::comm::progress_from_name(parts[1]));
  sb::fsdp::EngineConfig cfg;
  cfg.strategy = parts.at(0);
  cfg.param_dtype = compute_dtype();
  cfg.loss_scaling = cfg.param_dtype == torch::kFloat16;
  if (parts.size() > 2) cfg.compression = sb::comm::policy_preset(parts[2]);
  sb::fsdp::Engine e(model, comm, cfg, sb::models::init_params(model.units(), 1));
  const int n = comm.size();
  const auto src = sb::data::markov_source(model.config(), rows * n, T, 1, 1);
  double busy = 0;
  // Seconds the communication thread spent inside collectives (overlapped or not).
  comm.set_trace_hook([&busy](const sb::CommEvent& ev) { busy += ev.duration_s; }, MPI_Wtime());
  constexpr int kV = 9;
  std::vector<std::array<double, kV>> per_step;
  for (int s = 0; s <= steps; ++s) {
    auto g = src->train(s);
    auto mine = sb::data::rank_rows(g, comm.rank(), n);
    busy = 0;
    const double t0 = MPI_Wtime();
    auto st = e.step({mine}, sb::fsdp::loss_terms(g));
    std::array<double, kV> v = {MPI_Wtime() - t0, st.comm_exposed_s, st.forward_s,
                                st.backward_s, st.optimizer_s, busy, st.comm_exposed_forward_s,
                                st.gather_wait_s, st.comm_exposed_optimizer_s};
    MPI_Allreduce(MPI_IN_PLACE, v.data(), kV, MPI_DOUBLE, MPI_MAX, world);
    if (s > 0) per_step.push_back(v);  // step 0 is the warm-up
  }
  comm.set_trace_hook(nullptr, 0);
  std::sort(per_step.begin(), per_step.end());  // by wall time (element 0)
  const auto& v = per_step[per_step.size() / 2];
  Figures f;
  f.step_s = v[0], f.min_step_s = per_step.front()[0], f.max_step_s = per_step.back()[0];
  f.tokens_per_s = static_cast<double>(rows * n * T) / f.step_s;
  f.exposed_frac = v[1] / v[0];
  f.fwd_s = v[2], f.bwd_s = v[3], f.opt_s = v[4], f.comm_busy_s = v[5];
  f.exp_fwd_s = v[6], f.gather_wait_s = v[7], f.exp_opt_s = v[8];
  f.model_state = e.memory().model_state;
  f.peak = e.memory().peak_model_state;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string preset = argc > 1 ? argv[1] : "gpt2";
  const std::int64_t rows = argc > 2 ? std::atoll(argv[2]) : 4;
  const std::int64_t T = argc > 3 ? std::atoll(argv[3]) : 128;
  const int steps = argc > 4 ? std::atoi(argv[4]) : 5;
  std::vector<std::string> strategies = {"full_shard+poll", "full_shard+inline", "no_shard+inline"};
  if (argc > 5) {
    strategies.clear();
    std::stringstream ss(argv[5]);
    for (std::string s; std::getline(ss, s, ',');) strategies.push_back(s);
  }
  at::set_num_threads(1);
  int rc = 0;
  try {
    auto model = sb::models::make_model(preset);
    const auto P = sb::models::count_params(model->units());
    if (rank == 0)
      std::printf("# bench_fsdp: %s (%lld params), %lld x %lld tokens per rank, %d ranks x 1 "
                  "thread, %d timed steps after 1 warm-up\n",
                  preset.c_str(), static_cast<long long>(P), static_cast<long long>(rows),
                  static_cast<long long>(T), size, steps);
    if (rank == 0 && compute_dtype() != torch::kFloat32) {
      const std::string missing = sb::models::missing_fast_units(torch::kCPU, compute_dtype());
      std::printf("# compute dtype %s: %s\n", sb::models::dtype_name(compute_dtype()).c_str(),
                  missing.empty() ? "the CPU has its units"
                                  : (missing + ": compute is slow, so communication is a small "
                                               "share and scaling flatters").c_str());
    }
    // The 1-rank baseline runs before the first strategy and after each one; a strategy's
    // scaling divides by the faster of the two baselines beside it (this VM's single-rank
    // speed drifts by 10-25% within minutes, so one baseline for all would favour some).
    auto single = [&] {
      Figures f;
      if (rank == 0) f = measure(*model, MPI_COMM_SELF, "no_shard", rows, T, steps);
      quiet_barrier(MPI_COMM_WORLD);
      MPI_Bcast(&f.tokens_per_s, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
      return f;
    };
    std::vector<Figures> bases = {single()};
    // All ranks alone at once: the machine's ceiling for N ranks without communication.
    double ceiling_tps = measure(*model, MPI_COMM_SELF, "no_shard", rows, T, steps).tokens_per_s;
    MPI_Allreduce(MPI_IN_PLACE, &ceiling_tps, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    bases.push_back(single());
    std::vector<std::pair<std::string, Figures>> all;
    for (const auto& s : strategies) {
      all.emplace_back(s, measure(*model, MPI_COMM_WORLD, s, rows, T, steps));
      bases.push_back(single());
    }
    auto base_near = [&](std::size_t k) {  // baseline tokens/s of measurement k (bases k, k+1)
      return std::max(bases[k].tokens_per_s, bases[k + 1].tokens_per_s);
    };
    if (rank == 0)
      std::printf("%-24s %5s %9s %8s %8s %8s %8s %8s %8s %9s %14s %14s\n", "strategy", "ranks",
                  "tokens/s", "step_s", "fwd_s", "bwd_s", "opt_s", "comm_s", "scaling",
                  "exposed%", "model_state_B", "peak_B");
    auto row = [&](const std::string& name, int ranks, const Figures& f, double base) {
      std::printf("%-24s %5d %9.1f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %9.2f %14llu %14llu\n",
                  name.c_str(), ranks, f.tokens_per_s, f.step_s, f.fwd_s, f.bwd_s, f.opt_s,
                  f.comm_busy_s, f.tokens_per_s / base, 100 * f.exposed_frac,
                  static_cast<unsigned long long>(f.model_state),
                  static_cast<unsigned long long>(f.peak));
    };
    auto detail = [&](const std::string& name, const Figures& f) {  // where exposed time went
      std::printf("#   %s step_s median %.3f (min %.3f, max %.3f over %d steps)\n", name.c_str(),
                  f.step_s, f.min_step_s, f.max_step_s, steps);
      std::printf("#   %s exposed per step: %.3f s in forward, %.3f s after backward (loss, "
                  "norm, optimizer), %.3f s waiting for all-gathers (forward and backward)\n",
                  name.c_str(), f.exp_fwd_s, f.exp_opt_s, f.gather_wait_s);
    };
    if (rank == 0) {
      row("1-rank", 1, bases[0], base_near(0));
      std::printf("%-24s %5d %9.1f %8s %8s %8s %8s %8s %8.3f   (ceiling: %d independent 1-rank "
                  "runs at once, no communication)\n", "ceiling", size, ceiling_tps, "", "", "",
                  "", "", ceiling_tps / base_near(0), size);
      row("1-rank", 1, bases[1], base_near(0));
      for (std::size_t i = 0; i < all.size(); ++i) {
        row(all[i].first, size, all[i].second, base_near(i + 1));
        detail(all[i].first, all[i].second);
        row("1-rank", 1, bases[i + 2], base_near(i + 1));
      }
    }
    if (rank == 0 && size == 2)
      for (std::size_t i = 0; i < all.size(); ++i) {
        const auto& [s, f] = all[i];
        const double scaling = f.tokens_per_s / base_near(i + 1);
        std::printf("# target %s: scaling %.3f (>= 1.85: %s; machine ceiling %.3f at the start), "
                    "exposed %.2f%% (<= 5%%: %s)\n", s.c_str(), scaling,
                    scaling >= 1.85 ? "PASS" : "MISS", ceiling_tps / base_near(0),
                    100 * f.exposed_frac, f.exposed_frac <= 0.05 ? "PASS" : "MISS");
      }
    // Model-state memory at 4 ranks from the formula (tests/mpi/fsdp_state.cpp asserts that
    // the engine's measured bytes equal it exactly).
    if (rank == 0) {
      const auto none = sb::comm::policy_preset("none");
      const auto ns = sb::fsdp::model_state_bytes(model->units(), "no_shard", 4, 4, torch::kFloat32, 1, none);
      const auto fs = sb::fsdp::model_state_bytes(model->units(), "full_shard", 4, 4, torch::kFloat32, 1, none);
      std::printf("# model state per rank at 4 ranks: full_shard %llu B / no_shard %llu B = %.4f "
                  "(target <= 0.26)\n", static_cast<unsigned long long>(fs),
                  static_cast<unsigned long long>(ns), double(fs) / ns);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] bench_fsdp: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
