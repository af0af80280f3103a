// The peaks of a training run (peak.h): which dtypes have one, the cache, the measurement on
// every rank at once, the ISA's figure.
#include "workloads/train/peak.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "harness/core/machine.h"
#include "workloads/models/device.h"
#include "workloads/models/dtype.h"
#include "workloads/train/peak_cache.h"

namespace sb::train {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
// Other work on the node above this many CPUs during a measurement: not cached (the same
// threshold as the report's flag, docs/METRICS.md "Measurement conditions").
constexpr double kQuietCpus = 0.25;

// The ranks of world on this node (MPI_COMM_TYPE_SHARED), freed on scope exit.
struct NodeComm {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  explicit NodeComm(MPI_Comm world) {
    int r = 0;
    MPI_Comm_rank(world, &r);
    sb::check_mpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &comm),
                  "MPI_Comm_split_type (GEMM peak)");
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
  }
  ~NodeComm() { MPI_Comm_free(&comm); }
};

double reduce(double v, MPI_Op op, MPI_Comm comm) {
  sb::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, op, comm), "MPI_Allreduce (GEMM peak)");
  return v;
}

// CPUs' worth of work on the node that was not its ranks' between two samples (as
// docs/METRICS.md "Measurement conditions"); infinity when /proc/stat is unreadable.
double other_cpus(const sb::CpuSample& a, const sb::CpuSample& b, const NodeComm& node) {
  const double own = reduce(b.own_cpu_s - a.own_cpu_s, MPI_SUM, node.comm);
  const double busy = a.node_busy_s < 0 || b.node_busy_s < 0 ? std::numeric_limits<double>::infinity()
                                                             : b.node_busy_s - a.node_busy_s;
  return reduce(std::max(0.0, (busy - own) / std::max(b.wall_s - a.wall_s, 1e-9)), MPI_MAX, node.comm);
}

// Measured now, on every rank of world at once; kept in the cache (host) when the node was quiet.
void measure(MeasuredPeak& p, const GemmPath& path, const torch::Device& d, torch::ScalarType dt,
             MPI_Comm world, const NodeComm& node, const std::string& file, const std::string& key) {
  const auto before = sb::cpu_sample();
  p.curve = measure_gemm_curve(path, d, dt, default_sweep(d), world);
  const double other = other_cpus(before, sb::cpu_sample(), node);
  int ranks = 1;
  MPI_Comm_size(world, &ranks);
  p.source = fmt::format("measured on {} ranks at once", ranks);
  if (file.empty()) return;
  if (other > kQuietCpus) {
    p.source += fmt::format(", not cached: other work used {:.2f} CPUs of the node meanwhile", other);
    return;
  }
  if (node.rank == 0) peak_cache_store(file, key, p.curve);
  p.source += ", kept in " + file;
}

// One dtype's peak: none without units for it; else the cache's (host, every rank found its
// entry) or measured now. The slowest rank's.
MeasuredPeak dtype_peak(const torch::Device& d, torch::ScalarType dt, MPI_Comm world, const NodeComm& node) {
  MeasuredPeak p;
  p.dtype = models::dtype_name(dt);
  p.gflops = kNan;
  if (dt != torch::kFloat) {
    const std::string missing = models::missing_fast_units(d, dt);
    if (!missing.empty()) {
      p.none = fmt::format("no {} peak: the {}", p.dtype, missing);
      return p;
    }
  }
  const GemmPath& path = gemm_paths().front();  // at::mm: what training's linears run on
  const std::string file = d.is_cpu() ? peak_cache_file() : "";  // a GPU measures in milliseconds
  static const sb::MachineInfo m = sb::machine_now("");
  const std::string key = peak_cache_key(m.cpu_model, at::get_num_threads(), node.size, p.dtype, path.name);
  std::string when;
  const auto hit = file.empty() ? std::nullopt : peak_cache_lookup(file, key, &when);
  if (reduce(hit ? 1 : 0, MPI_MIN, world) > 0) {
    p.curve = *hit;
    p.source = fmt::format("cache {} (measured {})", file, when);
  } else {
    measure(p, path, d, dt, world, node, file, key);
  }
  p.n = p.curve.best().n;
  p.gflops = reduce(p.curve.best().gflops, MPI_MIN, world);
  return p;
}

}  // namespace

Peaks training_peaks(const torch::Device& d, torch::ScalarType compute, double given_gflops, MPI_Comm world) {
  Peaks k;
  const NodeComm node(world);
  if (given_gflops > 0) {
    k.compute.dtype = models::dtype_name(compute);
    k.compute.gflops = k.fp32.gflops = kNan;
    k.compute.none = k.fp32.none = "not measured: peak_gflops is given";
    k.fp32.dtype = "fp32";
  } else {
    k.compute = dtype_peak(d, compute, world, node);
    k.fp32 = compute == torch::kFloat ? k.compute : dtype_peak(d, torch::kFloat, world, node);
  }
  k.divisor = given_gflops > 0 ? given_gflops : k.compute.gflops;
  k.divisor_name = given_gflops > 0 ? "given (peak_gflops)" : k.compute.dtype;
  if (!(k.divisor > 0)) k.no_mfu = "no MFU: " + k.compute.none;
  if (d.is_cuda()) {
    k.isa.gflops = kNan;
    k.isa.unknown = "no ISA rule for a GPU (its data sheet's peak goes in peak_gflops)";
  } else {
    static const sb::MachineInfo m = sb::machine_now("");
    const double cores = std::min<double>(at::get_num_threads(), static_cast<double>(m.physical_cores) / node.size);
    k.isa = isa_peak(m, compute, cores);
  }
  return k;
}

}  // namespace sb::train
