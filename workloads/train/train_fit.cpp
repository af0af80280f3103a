// The train task's part of `shardbench fit` (harness/spec/fit.h; docs/METRICS.md "Fit"): the
// keys it may choose (strategy, activation_checkpoint, seq_chunks, offload_optimizer,
// offload_param, kv_offload), the
// costs it measures here (the GEMM rate of the point's device, dtype and threads; memory copy
// bandwidth; O_DIRECT disk bandwidth of offload_dir), and a candidate's prediction: its peak
// per rank from the memory model, its step time from
//   compute = executed FLOPs a rank x (1 + recomputation) / GEMM rate
//   comm    = the strategy's wire bytes a rank (fsdp::step_wire_bytes) x 2 / copy bandwidth
//   disk    = offload file bytes read / read bandwidth + written / write bandwidth (the
//             optimizer's file read whole and written but for the decay mask; with the
//             master on disk each gather's shard read besides)
// summed (no overlap assumed: an upper bound of each part's share).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "harness/core/check.h"
#include "harness/core/machine.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/fit.h"
#include "harness/spec/mesh_config.h"
#include "harness/spec/model_keys.h"
#include "harness/workload.h"
#include "workloads/comm/policy.h"
#include "workloads/fsdp/strategy.h"
#include "workloads/fsdp/wire_model.h"
#include "workloads/models/device.h"
#include "workloads/models/device_config.h"
#include "workloads/models/direct_file.h"
#include "workloads/models/dtype.h"
#include "workloads/models/model.h"
#include "workloads/train/gemm_peak.h"
#include "workloads/train/train_config.h"
#include "workloads/train/train_workload.h"

namespace sb::train {
namespace {

using I = std::int64_t;
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int threads_of(const Point& p) {
  const int t = base_config(p).threads;
  return t > 0 ? t : std::max(1, usable_cores() / std::max(1, base_config(p).world));
}
bool may_use_disk(const Point& p) {
  const StepKeys& s = config<StepKeys>(p);
  for (const std::string& v : {s.offload_optimizer, s.offload_param, s.kv_offload})
    if (v == "auto" || v == "disk") return true;
  return false;
}
std::string gemm_cost(const Point& p) {
  return fmt::format("gemm_gflops {} {} t{}", config<models::DeviceConfig>(p).device,
                     models::dtype_name(point_dtype(p)), threads_of(p));
}
std::string disk_cost(const char* what, const Point& p) {
  return fmt::format("disk_{}_gbs {}", what, offload_folder(config<StepKeys>(p).offload_dir));
}

std::vector<std::string> costs_needed(const Point& p) {
  std::vector<std::string> c = {gemm_cost(p), "copy_gbs"};
  if (may_use_disk(p)) c.push_back(disk_cost("write", p)), c.push_back(disk_cost("read", p));
  return c;
}

// The best rate of square GEMMs on the point's device, dtype and threads (gemm_peak.h).
double measure_gemm(const Point& p) {
  const int before = torch::get_num_threads();
  torch::set_num_threads(threads_of(p));
  const auto device = models::resolve_device(config<models::DeviceConfig>(p).device, 0);
  const auto curve = measure_gemm_curve(gemm_path("at::mm"), device, point_dtype(p), default_sweep(device), MPI_COMM_NULL);
  torch::set_num_threads(before);
  return curve.best().gflops;
}

// memcpy of 256 MiB, the best of 5: what the shared-memory transport copies with (twice a byte).
double measure_copy() {
  const std::size_t n = std::size_t{256} << 20;
  std::vector<char> a(n, 1), b(n, 0);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const double t0 = now();
    std::memcpy(b.data(), a.data(), n);
    best = std::min(best, now() - t0);
  }
  return static_cast<double>(n) / best / 1e9;
}

// 256 MiB written then read in 4 MiB blocks through O_DIRECT, as the offload stores do (the
// same file class: models/direct_file.h).
double measure_disk(bool write, const std::string& dir) {
  const std::size_t block = std::size_t{4} << 20, blocks = 64;
  const models::DirectFile f(fmt::format("{}/shardbench-fit-{}.bin", dir, ::getpid()), "fit",
                             "set offload_dir to a writable folder with 256 MiB free", /*unlink_now=*/true);
  const auto buf = models::DirectFile::aligned(block);
  std::memset(buf.get(), 7, block);
  const double t0 = now();
  for (std::size_t i = 0; i < blocks; ++i) f.write(buf.get(), block, i * block);
  f.sync();
  const double wt = now() - t0, t1 = now();
  for (std::size_t i = 0; i < blocks; ++i) f.read(buf.get(), block, i * block);
  const double rt = now() - t1;
  return static_cast<double>(block * blocks) / (write ? wt : rt) / 1e9;
}

double measure(const std::string& cost, const Point& p) {
  if (cost == gemm_cost(p)) return measure_gemm(p);
  if (cost == "copy_gbs") return measure_copy();
  if (cost == disk_cost("write", p)) return measure_disk(true, offload_folder(config<StepKeys>(p).offload_dir));
  if (cost == disk_cost("read", p)) return measure_disk(false, offload_folder(config<StepKeys>(p).offload_dir));
  SB_FAIL("fit: the train task has no cost '{}'", cost);
}

// FLOPs of one step a rank, attention as executed, with what checkpointing recomputes: full
// recomputes the forward (a third of the step) of ceil(L / k) of L blocks, chunked of every
// block, selective the attention's forward.
double rank_flops(const Point& p, const models::Model& m) {
  const ModelKeys& mk = config<ModelKeys>(p);
  models::Batch b;
  b.input_ids = torch::zeros({mk.batch, mk.seq}, torch::kLong);
  b.targets = torch::zeros({mk.batch, mk.seq}, torch::kLong);
  const auto f = m.train_flops(b);
  const auto ac = checkpoint_config(p);
  const double L = static_cast<double>(m.config().n_layer);
  double again = 0;
  if (ac.mode == models::CheckpointMode::Full)
    again = std::ceil(L / ac.every) / L * f.executed() / 3.0;
  else if (ac.mode == models::CheckpointMode::Chunked)  // every block, chunk by chunk
    again = f.executed() / 3.0;
  else if (ac.mode == models::CheckpointMode::Selective)
    again = f.attention_executed / 3.0;
  return (f.executed() + again) / std::max(1, base_config(p).world);
}

FitPrediction predict(const Point& p, const FitCosts& costs) {
  FitPrediction out;
  const auto cost = [&](const std::string& name) -> double {
    const auto it = costs.find(name);
    if (it == costs.end() || it->second <= 0) {
      if (out.missing.empty()) out.missing = name;
      return 1.0;
    }
    return it->second;
  };
  const fsdp::MemoryPrediction m = point_memory(p);
  out.peak_bytes = static_cast<double>(m.peak());
  const auto model = make_train_model(p);
  const double compute = rank_flops(p, *model) / (cost(gemm_cost(p)) * 1e9);
  double comm = 0;
  if (base_config(p).world > 1) {
    const auto& info = fsdp::strategy_info(config<ModelKeys>(p).strategy);
    const int sg = config<MeshConfig>(p).dp_shard * config<MeshConfig>(p).sp;
    const int dp_world = base_config(p).world / std::max(1, config<MeshConfig>(p).tp * config<MeshConfig>(p).pp);
    const auto mesh = info.mesh(dp_world, sg == 0 ? dp_world : sg);
    const std::vector<int> once(model->units().size(), 1);
    double bytes = 0;
    for (const auto& [kind, b] : fsdp::step_wire_bytes(info, model->units(), once, mesh, point_dtype(p),
                                                        models::dtype_from_name(config<StepKeys>(p).reduce_dtype),
                                                        comm::policy_from_point(p)))
      bytes += static_cast<double>(b);
    comm = 2 * bytes / (cost("copy_gbs") * 1e9);
  }
  double disk = 0;
  const double optim = static_cast<double>(m.disk_optim), kv = static_cast<double>(m.disk_kv);
  if (optim + kv > 0) {
    // The optimizer reads its regions (m, v, the mask and with the master on disk p) and
    // writes all but the mask back; the key/value chunks go out and come back once. The
    // master on disk: each gather reads the unit's shard, twice a step where parameters are
    // re-gathered for backward.
    const StepKeys& s = config<StepKeys>(p);
    const bool master = s.offload_param == "disk" && s.offload_optimizer == "disk";
    const double regions = master ? 4 : 3;
    double gathers = 0;
    if (master) {
      const auto& layout = fsdp::strategy_info(config<ModelKeys>(p).strategy).layout;
      gathers = optim / regions * (layout.reshard_after_forward ? 2 : 1);
    }
    disk = (optim + kv + gathers) / (cost(disk_cost("read", p)) * 1e9) +
           (optim * (regions - 1) / regions + kv) / (cost(disk_cost("write", p)) * 1e9);
  }
  out.step_s = compute + comm + disk;
  out.detail = fmt::format("compute {:.3g} s + comm {:.3g} s + disk {:.3g} s", compute, comm, disk);
  return out;
}

}  // namespace

// memory_budget: fit's budget per rank (harness/spec/fit.h).
struct FitBudgetKeys {
  std::int64_t memory_budget = 0;
  static void declare(Fields<FitBudgetKeys>& f) {
    f.tasks({"train"});
    f.add("memory_budget", &FitBudgetKeys::memory_budget, std::int64_t{0},
          "bytes a rank may use, for `shardbench fit`'s choice of the keys a point leaves \"auto\"; "
          "0 = the tightest of RAM, the memory cgroup and ulimit -v over the point's ranks, less "
          "10% and 512 MiB (docs/SUITES.md \"fit\")")
        .range(std::int64_t{0}, std::int64_t{1} << 50)
        .unit("bytes");
  }
};
SB_CONFIG_SECTION(FitBudgetKeys);

namespace {

const Registrar kRegister([] {
  // seq_chunks: FPDT's chunks (fpdt or chunked blocks: the others take 0), the fewest first, so
  // that among equal predicted steps the largest chunks that fit win (the larger GEMMs);
  // 0 (chunks of attention_chunk tokens) last.
  register_fit("train", {{"strategy", "activation_checkpoint", "seq_chunks", "offload_optimizer", "offload_param",
                          "kv_offload"},
                         costs_needed, measure, predict,
                         [](const Point& p) {
                           // A GPU's memory is not the host's, which the default budget reads.
                           const auto set = static_cast<double>(config<FitBudgetKeys>(p).memory_budget);
                           return set == 0 && config<models::DeviceConfig>(p).device == "cuda" ? -1.0 : set;
                         },
                         {{"seq_chunks", {2, 4, 8, 16, 32, 64, 0}}}});
});

}  // namespace
}  // namespace sb::train
