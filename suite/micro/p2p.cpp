// Point-to-point micro-benchmarks (OSU's osu_latency, osu_bw, osu_bibw; p2p_case.h), under
// mpirun with an even number of ranks (pairs 2i, 2i + 1):
//   mpirun -np 2 --bind-to none build/micro/micro_p2p [--sizes=MIN:MAX] [--rounds=8] [--window=64]
// Each size runs raw MPI and our communicator on each CPU backend, blocking (ours) and
// non-blocking (ours-async), interleaved: every round times every implementation once, in
// turn, and each figure is the best of the rounds (the least mean iteration time of the
// slowest rank: this machine's speed drifts between rounds, and the best is the
// implementation's own cost). Latency is one way (round trip / 2, OSU's convention);
// bandwidth is bytes x window / iteration time (bibw: both directions). Prints the machine,
// then per benchmark a table beside raw MPI, then the targets: the mpi backend's blocking
// latency within 1 us of raw MPI at 8 B, its p2p_bw within 3% of raw MPI at 4 MiB.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "suite/micro/bench_util.h"
#include "workloads/comm/communicator.h"
#include "workloads/micro/collective_case.h"
#include "workloads/micro/p2p_case.h"

namespace {

using sb::micro::P2PBench;

struct Impl {
  std::string label;  // "mpi", "ours/mpi", "ours-async/gloo", ...
  std::string impl;   // P2PConfig::impl
  sb::comm::Communicator* comm = nullptr;
};

int iterations(std::int64_t bytes, P2PBench b) {
  const int base = sb::micro::default_iterations(bytes);  // 200 small .. 5 large
  return b == P2PBench::Latency ? base * 5 : std::max(3, base / 10);
}

// bench x size -> label -> best mean iteration seconds over the rounds.
using Best = std::map<std::string, double>;

Best measure(P2PBench bench, std::int64_t bytes, int window, int rounds,
             const std::vector<Impl>& impls, std::int64_t& wrong) {
  Best best;
  std::vector<std::unique_ptr<sb::micro::P2PCase>> cases;
  for (const auto& i : impls) {
    sb::micro::P2PConfig cfg;
    cfg.bench = bench;
    cfg.impl = i.impl;
    cfg.bytes = bytes;
    cfg.window = window;
    cases.push_back(std::make_unique<sb::micro::P2PCase>(cfg, MPI_COMM_WORLD, i.comm));
    best[i.label] = std::numeric_limits<double>::infinity();
  }
  const int iters = iterations(bytes, bench);
  for (int r = 0; r < rounds; ++r)
    for (std::size_t k = 0; k < impls.size(); ++k) {
      const auto t = sb::micro::time_p2p(*cases[k], 2, iters, MPI_COMM_WORLD);
      best[impls[k].label] = std::min(best[impls[k].label], t.mean_s);
    }
  for (auto& c : cases) {
    std::int64_t w = c->check();
    MPI_Allreduce(MPI_IN_PLACE, &w, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    wrong += w;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  long long lo = 1, hi = 4ll << 20;
  int rounds = 8, window = 64;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--sizes=", 8) == 0) std::sscanf(argv[i] + 8, "%lld:%lld", &lo, &hi);
    if (std::strncmp(argv[i], "--rounds=", 9) == 0) rounds = std::atoi(argv[i] + 9);
    if (std::strncmp(argv[i], "--window=", 9) == 0) window = std::atoi(argv[i] + 9);
  }
  if (n % 2 != 0) {
    if (rank == 0)
      std::fprintf(stderr, "micro_p2p pairs ranks (2i, 2i + 1): run an even number of ranks, "
                           "not %d\n", n);
    MPI_Finalize();
    return 2;
  }
  // One communicator per CPU backend (made on every rank in the same order).
  std::vector<std::unique_ptr<sb::comm::Communicator>> comms;
  std::vector<Impl> impls{{"mpi", "mpi", nullptr}};
  for (const auto& b : sb::comm::backends()) {
    if (!b.available || b.name == "nccl") continue;
    comms.push_back(std::make_unique<sb::comm::Communicator>(
        MPI_COMM_WORLD, 0, provided == MPI_THREAD_MULTIPLE, sb::comm::BackendChoice{b.name, ""}));
    impls.push_back({"ours/" + b.name, "ours", comms.back().get()});
    impls.push_back({"ours-async/" + b.name, "ours-async", comms.back().get()});
  }
  if (rank == 0) {
    const auto m = sb::machine_now(sb::host_name());
    std::printf("# %s, %d ranks on %s (%s; ISA: %s); best of %d interleaved rounds, window %d\n",
                m.host.c_str(), n, m.cpu_model.c_str(),
                n > m.cores ? "oversubscribed: timings mean nothing" : "one core per rank or more",
                fmt::format("{}", fmt::join(m.isa, " ")).c_str(), rounds, window);
    if (sb::bench::allowed_cores() < 1)
      std::printf("# could not read this rank's core binding\n");
  }
  // Powers of 4 from lo, and the targets' 8 B and 4 MiB when in range.
  std::vector<long long> sizes;
  for (long long b = lo; b <= hi; b *= 4) sizes.push_back(b);
  for (long long t : {8ll, 4ll << 20})
    if (t >= lo && t <= hi && std::find(sizes.begin(), sizes.end(), t) == sizes.end())
      sizes.push_back(t);
  std::sort(sizes.begin(), sizes.end());
  std::int64_t wrong = 0;
  std::map<std::string, double> lat8, bw4m;  // the targets' figures
  for (const auto& [name, doc] : sb::micro::p2p_benches()) {
    const P2PBench bench = sb::micro::p2p_from_name(name);
    const bool lat = bench == P2PBench::Latency;
    if (rank == 0) {
      std::printf("\n# %s: %s, %s\n%-10s", name.c_str(), doc.c_str(),
                  lat ? "one-way latency in us (raw MPI, then each implementation and its "
                        "difference from MPI)"
                      : "MB/s (raw MPI, then each implementation and its ratio to MPI)",
                  "bytes");
      for (const auto& i : impls) std::printf(" %18s", i.label.c_str());
      std::printf("\n");
    }
    for (long long b : sizes) {
      const Best best = measure(bench, b, window, rounds, impls, wrong);
      sb::micro::P2PConfig cfg;
      cfg.bench = bench;
      cfg.bytes = b;
      cfg.window = window;
      // The per-message figure of an iteration time, as P2PCase computes it.
      auto figure = [&](double s) {
        return lat ? s / 2 * 1e6 : static_cast<double>(b) * window * (bench == P2PBench::Bibw ? 2 : 1) / s / 1e6;
      };
      const double base = figure(best.at("mpi"));
      if (rank == 0) {
        std::printf("%-10lld %18.2f", b, base);
        for (std::size_t k = 1; k < impls.size(); ++k) {
          const double v = figure(best.at(impls[k].label));
          std::printf(lat ? " %9.2f (%+6.2f)" : " %9.1f (%5.3fx)", v, lat ? v - base : v / base);
        }
        std::printf("\n");
      }
      if (lat && b == 8)
        for (const auto& [l, s] : best) lat8[l] = figure(s);
      if (bench == P2PBench::Bw && b == (4ll << 20))
        for (const auto& [l, s] : best) bw4m[l] = figure(s);
    }
  }
  if (rank == 0) {
    std::printf("\n# targets (same run)\n");
    if (lat8.count("ours/mpi")) {
      const double d = lat8["ours/mpi"] - lat8["mpi"];
      std::printf("p2p_latency 8 B, mpi backend blocking: %.2f us vs raw MPI %.2f us: +%.2f us "
                  "(target <= 1 us) %s\n", lat8["ours/mpi"], lat8["mpi"], d, d <= 1.0 ? "PASS" : "MISS");
    } else {
      std::printf("p2p_latency 8 B: not measured (--sizes does not include 8)\n");
    }
    if (bw4m.count("ours/mpi")) {
      const double r = bw4m["ours/mpi"] / bw4m["mpi"];
      std::printf("p2p_bw 4 MiB, mpi backend: %.1f MB/s vs raw MPI %.1f MB/s: %.3fx (target >= "
                  "0.97) %s\n", bw4m["ours/mpi"], bw4m["mpi"], r, r >= 0.97 ? "PASS" : "MISS");
    } else {
      std::printf("p2p_bw 4 MiB: not measured (--sizes does not include 4194304)\n");
    }
    std::printf("#wrong %lld\n", static_cast<long long>(wrong));
  }
  comms.clear();
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
