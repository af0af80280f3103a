// Collective micro-benchmarks (OSU / nccl-tests style) on Google Benchmark, under mpirun:
//   mpirun -np 2 build/micro/micro_collectives [--sizes=MIN:MAX] [--benchmark_filter=...]
// For each collective x implementation (raw MPI, our communicator inline and async, our
// compressed collectives) x size (4 B .. 64 MiB, x4 steps): mean latency of the slowest
// rank, min/max over ranks, algorithm and bus bandwidth (nccl-tests factors,
// docs/METRICS.md), wire bytes and #wrong from a check run after the timed loop.
// Iteration counts are fixed per size so every rank runs the same number of calls.
// Ends with the targets: ours keeps >= 95% of MPI's bus bandwidth from 1 MiB up and adds
// <= 1 us to small messages -- printed beside the MPI baseline measured in the same run.
// Then the backends (workloads/comm/backend.h): every collective x size on mpi and gloo,
// interleaved, makes a tuning table; a second interleaved pass times mpi, gloo and auto (on
// that table) and prints, per (op, size), who wins and auto against the best backend of the
// second pass (target: within 5%; "noise" where auto is further off but within the best
// backend's own spread between rounds, an A/A difference on this machine). Times are the
// least of 8 interleaved rounds' means (backend_tuning.h). --backends-only skips the Google
// Benchmark part.
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include <benchmark/benchmark.h>
#include <mpi.h>

#include <filesystem>
#include <unistd.h>

#include "workloads/comm/backend_table.h"
#include "workloads/comm/communicator.h"
#include "workloads/micro/backend_tuning.h"
#include "workloads/micro/collective_case.h"

namespace {

using sb::micro::Op;

std::unique_ptr<sb::comm::Communicator> g_inline, g_async;
// (op, impl, bytes) -> mean seconds of the slowest rank; filled on every rank.
std::map<std::tuple<std::string, std::string, std::int64_t>, double> g_mean;

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

void run_case(benchmark::State& st, Op op, std::string impl, std::int64_t bytes) {
  sb::micro::CaseConfig cfg;
  cfg.op = op;
  cfg.impl = impl;
  cfg.bytes = bytes;
  sb::comm::Communicator* c = impl == "ours-async" ? g_async.get() : g_inline.get();
  sb::micro::CollectiveCase cc(cfg, MPI_COMM_WORLD, c);
  for (int i = 0; i < 2; ++i) cc.run();  // warm-up, untimed
  double local_sum = 0, max_sum = 0;
  for (auto _ : st) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    cc.run();
    double dt = MPI_Wtime() - t0;
    local_sum += dt;
    MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    max_sum += dt;
    st.SetIterationTime(dt);  // the slowest rank's time is the call's time
  }
  const double iters = static_cast<double>(st.iterations());
  double mine = local_sum / iters, lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const std::int64_t wrong = cc.check();  // after the timed loop
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const double mean = max_sum / iters;
  const double algbw = cc.size_bytes() / mean / 1e9;
  g_mean[{sb::micro::op_name(op), impl, bytes}] = mean;
  st.counters["size_B"] = static_cast<double>(cc.size_bytes());
  st.counters["wire_B"] = static_cast<double>(cc.wire_bytes());
  st.counters["rank_min_us"] = lo * 1e6;
  st.counters["rank_max_us"] = hi * 1e6;
  st.counters["algbw_GBps"] = algbw;
  st.counters["busbw_GBps"] = algbw * sb::comm::bus_factor(sb::micro::op_name(op), n);
  st.counters["wrong"] = static_cast<double>(wrong);
  if (wrong != 0) st.SkipWithError("result check failed (#wrong != 0)");
}

std::string fmt_kept(double kept) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "busbw kept %.1f%% %s", kept * 100, kept >= 0.95 ? "PASS" : "MISS");
  return buf;
}

void print_targets(int n) {
  std::printf("\n# targets (same run): ours vs raw MPI\n");
  std::printf("%-15s %-11s %12s %12s %12s %9s %s\n", "op", "impl", "size_B", "mpi_us", "ours_us",
              "ratio", "check");
  for (const auto& [key, mpi_mean] : g_mean) {
    const auto& [op, impl, bytes] = key;
    if (impl != "mpi") continue;
    for (const char* ours : {"ours", "ours-async"}) {
      auto it = g_mean.find({op, ours, bytes});
      if (it == g_mean.end()) continue;
      const double o = it->second;
      std::string check;
      if (bytes >= (1 << 20)) {  // bus bandwidth kept: mpi_time / ours_time >= 0.95
        const double kept = mpi_mean / o;
        check = fmt_kept(kept);
      } else if (bytes <= 1024) {  // added latency <= 1 us
        const double added_us = (o - mpi_mean) * 1e6;
        char buf[64];
        std::snprintf(buf, sizeof buf, "added %.2f us %s", added_us, added_us <= 1.0 ? "PASS" : "MISS");
        check = buf;
      }
      std::printf("%-15s %-11s %12lld %12.2f %12.2f %9.3f %s\n", op.c_str(), ours,
                  static_cast<long long>(bytes), mpi_mean * 1e6, o * 1e6, mpi_mean / o, check.c_str());
    }
  }
  std::printf("# ranks: %d\n", n);
}

// The backend comparison (see the top). Collective; rank 0 prints.
void compare_backends(std::int64_t lo, std::int64_t hi, int n, int rank) {
  using sb::comm::BackendChoice;
  using sb::comm::Communicator;
  std::vector<std::int64_t> sizes;
  for (std::int64_t b = lo; b <= hi; b *= 4) sizes.push_back(b);
  std::vector<Op> ops(std::begin(sb::comm::kCollOps), std::end(sb::comm::kCollOps));
  Communicator mpi(MPI_COMM_WORLD, n, false, BackendChoice{"mpi", ""});
  Communicator gloo(MPI_COMM_WORLD, n, false, BackendChoice{"gloo", ""});
  auto first = sb::micro::measure_backends({{"mpi", &mpi}, {"gloo", &gloo}}, ops, sizes,
                                           MPI_COMM_WORLD);
  auto table = sb::comm::make_table(first.rows);
  table.world = n;
  table.hosts = sb::comm::host_set(MPI_COMM_WORLD);
  table.source = "micro_collectives, first pass";
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("sb_backends_" + std::to_string(getpid()) + ".toml")).string();
  sb::comm::write_table(table, path);
  Communicator autoc(MPI_COMM_WORLD, n, false, BackendChoice{"auto", path});
  auto second = sb::micro::measure_backends({{"mpi", &mpi}, {"gloo", &gloo}, {"auto", &autoc}},
                                            ops, sizes, MPI_COMM_WORLD);
  std::filesystem::remove(path);
  if (rank != 0) return;
  std::printf("\n# backends (same run, interleaved; mean us per call of the slowest rank, %d ranks)\n"
              "# auto: the table of a first pass of this run; auto/best against the second pass\n",
              n);
  std::printf("%-15s %10s %11s %11s %11s %-5s %-6s %9s %6s %s\n", "op", "size_B", "mpi_us",
              "gloo_us", "auto_us", "auto", "winner", "auto/best", "noise", "check");
  int pass = 0, noise = 0, agree = 0;
  for (std::size_t i = 0; i < second.rows.size(); ++i) {
    const auto& e = second.rows[i];
    const double m = e.seconds.at("mpi"), g = e.seconds.at("gloo"), a = e.seconds.at("auto");
    const double best = std::min(m, g);
    const char* winner = m <= g ? "mpi" : "gloo";
    const std::string choice = table.choose(e.op, e.bytes);
    const double band = second.spread[i].at(winner);
    const char* check = a <= 1.05 * best ? "PASS" : a <= (1 + band) * best ? "noise" : "MISS";
    pass += check[0] == 'P';
    noise += check[0] == 'n';
    agree += choice == winner;
    std::printf("%-15s %10llu %11.2f %11.2f %11.2f %-5s %-6s %9.3f %5.0f%% %s\n",
                sb::comm::coll_name(e.op), static_cast<unsigned long long>(e.bytes), m * 1e6,
                g * 1e6, a * 1e6, choice.c_str(), winner, a / best, band * 100, check);
  }
  const auto rows = second.rows.size();
  std::printf("# auto within 5%% of the best backend: %d of %zu PASS, %d more within the best's "
              "own round-to-round spread, %zu MISS; auto's choice = this pass's winner in %d of "
              "%zu; #wrong %lld\n", pass, rows, noise, rows - pass - noise, agree, rows,
              static_cast<long long>(first.wrong + second.wrong));
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::int64_t lo = 4, hi = 64ll << 20;
  bool backends_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backends-only") == 0) {
      backends_only = true;
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      --i;
      continue;
    }
    if (std::strncmp(argv[i], "--sizes=", 8) == 0) {
      std::sscanf(argv[i] + 8, "%lld:%lld", reinterpret_cast<long long*>(&lo),
                  reinterpret_cast<long long*>(&hi));
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      --i;
    }
  }
  g_inline = std::make_unique<sb::comm::Communicator>(MPI_COMM_WORLD, n, /*async=*/false);
  g_async = std::make_unique<sb::comm::Communicator>(MPI_COMM_WORLD, n,
                                                     provided == MPI_THREAD_MULTIPLE);
  for (const auto& opn : sb::micro::op_names()) {
    const Op op = sb::micro::op_from_name(opn);
    for (const auto& impl : sb::micro::impl_names()) {
      const bool compressed = sb::micro::is_compressed(impl);
      if (compressed && (op == Op::Broadcast || op == Op::AllToAll)) continue;
      for (std::int64_t b = lo; b <= hi; b *= 4) {
        const std::string name = opn + "/" + impl + "/" + std::to_string(b);
        benchmark::RegisterBenchmark(name.c_str(), run_case, op, impl, b)
            ->Iterations(sb::micro::default_iterations(b))
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  NullReporter null;
  if (!backends_only) {
    if (rank == 0) benchmark::RunSpecifiedBenchmarks();
    else benchmark::RunSpecifiedBenchmarks(&null);
    if (rank == 0) print_targets(n);
  }
  g_async.reset();
  g_inline.reset();
  compare_backends(lo, hi, n, rank);
  MPI_Finalize();
  return 0;
}
