// GEMM paths and the growing-size peak measurement (gemm_peak.h).
#include "workloads/train/gemm_peak.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "harness/core/check.h"
#include "harness/core/mpi_context.h"
#include "workloads/models/device.h"
#include "workloads/quant/onednn_packed.h"

namespace sb::train {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// (n, n) operands; fp32 normal values cast to the dtype (randn has no kernel for some 16-bit
// types on every device).
torch::Tensor operand(std::int64_t n, const torch::Device& d, torch::ScalarType dtype) {
  return torch::randn({n, n}, torch::TensorOptions().device(d)).to(dtype);
}

std::vector<GemmPath> make_paths() {
  std::vector<GemmPath> p;
  p.push_back({"at::mm", "LibTorch's mm (MKL fp32, oneDNN bf16 / fp16 on the host; cuBLAS): the "
                         "kernels at::linear runs training's and inference's matmuls on",
               [](const torch::Device&, torch::ScalarType) { return true; },
               [](std::int64_t n, const torch::Device& d, torch::ScalarType dt) -> std::function<void()> {
                 auto a = operand(n, d, dt), b = operand(n, d, dt), c = torch::empty({n, n}, a.options());
                 return [a, b, c]() mutable { at::mm_out(c, a, b); };
               }});
  p.push_back({"onednn_packed", "oneDNN's prepacked bf16 linear (quant/onednn_packed.h): serving's "
                                "bf16 quantized linears on a CPU with bf16 units",
               [](const torch::Device& d, torch::ScalarType dt) {
                 return d.is_cpu() && dt == torch::kBFloat16 && quant::onednn_packing_available();
               },
               [](std::int64_t n, const torch::Device& d, torch::ScalarType dt) -> std::function<void()> {
                 auto x = operand(n, d, dt), w = quant::onednn_pack(operand(n, d, dt));
                 return [x, w] { quant::onednn_linear(x, w, torch::Tensor()); };
               }});
  return p;
}

double all_reduce(double v, MPI_Op op, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return v;
  sb::check_mpi(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, op, comm), "MPI_Allreduce (GEMM peak)");
  return v;
}

void barrier(MPI_Comm comm) {
  if (comm != MPI_COMM_NULL) sb::check_mpi(MPI_Barrier(comm), "MPI_Barrier (GEMM peak)");
}

// One size on every rank at once: one untimed call (kernel choice, first touch), then timed
// repetitions, as many as fit in sweep.reps_s by the slowest rank's first call: at least 2,
// but 1 when one call alone takes longer (a 4096^3 fp32 GEMM of one thread: 2 s; noise is a
// small part of it, and every rank pays it in every run that is not cached).
GemmSize measure_size(const GemmPath& path, std::int64_t n, const torch::Device& d, torch::ScalarType dtype,
                      const GemmSweep& sweep, MPI_Comm comm) {
  auto gemm = path.make(n, d, dtype);
  barrier(comm);
  double t0 = now_s();
  gemm();
  models::synchronize(d);
  const double first = all_reduce(now_s() - t0, MPI_MAX, comm);
  GemmSize s;
  s.n = n;
  s.reps = first > sweep.reps_s ? 1
                                : static_cast<int>(std::clamp(std::ceil(sweep.reps_s / std::max(first, 1e-9)), 2.0,
                                                              static_cast<double>(sweep.max_reps)));
  double best = 1e30;
  for (int r = 0; r < s.reps; ++r) {
    barrier(comm);  // every rank's GEMM runs at the same time: they share the node
    t0 = now_s();
    gemm();
    models::synchronize(d);
    best = std::min(best, now_s() - t0);
  }
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  s.gflops = all_reduce(flops / best / 1e9, MPI_MIN, comm);
  s.seconds = all_reduce(best, MPI_MAX, comm);
  return s;
}

}  // namespace

const std::vector<GemmPath>& gemm_paths() {
  static const std::vector<GemmPath> p = make_paths();
  return p;
}

const GemmPath& gemm_path(const std::string& name) {
  std::vector<std::string> known;
  for (const auto& p : gemm_paths()) {
    if (p.name == name) return p;
    known.push_back(p.name);
  }
  SB_FAIL("unknown GEMM path '{}'; the known ones: {}", name, fmt::join(known, ", "));
}

GemmSweep default_sweep(const torch::Device& d) {
  GemmSweep s;
  if (d.is_cuda()) s.max_n = 8192;  // a GPU's tensor cores fill only at larger sizes
  return s;
}

const GemmSize& GemmCurve::best() const {
  SB_CHECK(!sizes.empty(), "GEMM curve of {} has no sizes", path);
  return *std::max_element(sizes.begin(), sizes.end(),
                           [](const GemmSize& a, const GemmSize& b) { return a.gflops < b.gflops; });
}

GemmCurve measure_gemm_curve(const GemmPath& path, const torch::Device& d, torch::ScalarType dtype,
                             const GemmSweep& sweep, MPI_Comm comm) {
  SB_CHECK(path.runs(d, dtype), "GEMM path {} does not run {} on {}", path.name, c10::toString(dtype), d.str());
  GemmCurve c;
  c.path = path.name;
  for (std::int64_t n = sweep.first_n; n <= sweep.max_n; n *= 2) {
    c.sizes.push_back(measure_size(path, n, d, dtype, sweep, comm));
    if (c.sizes.back().seconds > sweep.stop_after_s) break;  // larger ones take 8x as long
  }
  return c;
}

}  // namespace sb::train
