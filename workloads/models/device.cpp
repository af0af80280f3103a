// Device selection and the `device` key (device.h).
#include "workloads/models/device.h"

#include <torch/cuda.h>
#ifdef SB_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <algorithm>

#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "harness/core/machine.h"
#include "harness/spec/base_config.h"
#include "harness/spec/model_keys.h"
#include "harness/workload.h"
#include "workloads/models/device_config.h"

namespace sb::models {

bool built_with_cuda() {
#ifdef SB_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int visible_gpus() { return static_cast<int>(torch::cuda::device_count()); }

torch::Device resolve_device(const std::string& name, int local_rank) {
  if (name == "cpu") return torch::Device(torch::kCPU);
  SB_REQUIRE(name == "cuda", "device = \"{}\": unknown device; known: cpu, cuda", name);
  SB_REQUIRE(built_with_cuda(),
             "device = \"cuda\": this shardbench was built without CUDA (the default preset); "
             "build the CUDA one (cmake --preset cuda && cmake --build --preset cuda) and run "
             "build-cuda/shardbench, or set device = \"cpu\"");
  const int n = visible_gpus();
  SB_REQUIRE(n > 0,
             "device = \"cuda\" on local rank {}: no GPU visible to this process (no GPU, no "
             "driver, or CUDA_VISIBLE_DEVICES empty); run on a GPU node or set device = \"cpu\"",
             local_rank);
  const torch::Device d(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % n));
#ifdef SB_WITH_CUDA
  c10::cuda::set_device(d.index());  // the context, cuBLAS handles and kCUDA without index
#endif
  return d;
}

void synchronize(const torch::Device& d) {
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
}

std::string missing_fast_units(const torch::Device& d, torch::ScalarType dtype) {
  if (dtype == torch::kFloat) return "";
  if (d.is_cuda()) {
#ifdef SB_WITH_CUDA
    if (dtype != torch::kBFloat16) return "";
    const auto* prop = at::cuda::getDeviceProperties(d.index());
    if (prop->major >= 8) return "";
    return fmt::format("GPU {} (compute capability {}.{}) has no bf16 tensor cores (8.0+)",
                       prop->name, prop->major, prop->minor);
#else
    return "";
#endif
  }
  std::vector<std::string> want;
  if (dtype == torch::kBFloat16) want = {"avx512_bf16", "amx_bf16"};
  // avx512_fp16 alone is not enough: on a Sapphire Rapids VM (avx512_fp16, no amx_fp16)
  // bert-large in fp16 ran at 1.03x its fp32 latency (micro_bench_quant, 2026-12-04).
  else if (dtype == torch::kHalf) want = {"amx_fp16"};
  else if (dtype == torch::kChar) want = {"avx512_vnni", "avx_vnni", "amx_int8"};
  else SB_FAIL("missing_fast_units: no rule for dtype {}", c10::toString(dtype));
  static const sb::MachineInfo m = sb::machine_now("");
  for (const auto& f : want)
    if (std::find(m.isa.begin(), m.isa.end(), f) != m.isa.end()) return "";
  const char* label = dtype == torch::kBFloat16 ? "bf16" : dtype == torch::kHalf ? "fp16" : "int8";
  return fmt::format("CPU {} has none of {} ({} matrix units)",
                     m.cpu_model.empty() ? std::string("(unknown model)") : m.cpu_model,
                     fmt::join(want, ", "), label);
}

std::int64_t device_peak_allocated_bytes(const torch::Device& d) {
#ifdef SB_WITH_CUDA
  if (d.is_cuda()) {
    using c10::CachingAllocator::StatType;
    const auto st = c10::cuda::CUDACachingAllocator::getDeviceStats(d.index());
    return st.allocated_bytes[static_cast<std::size_t>(StatType::AGGREGATE)].peak;
  }
#endif
  return -1;
}

namespace {
// Known at plan time: whether this binary can use a GPU at all (a GPU itself is checked on
// the node that runs the point, before the first step).
void validate(const DeviceConfig& c, const sb::Point& p, std::vector<sb::Diagnostic>& out) {
  if (c.device != "cuda") return;
  if (!built_with_cuda())
    out.push_back({"device",
                   "device = \"cuda\" needs the CUDA build of shardbench (cmake --preset cuda "
                   "&& cmake --build --preset cuda, then build-cuda/shardbench); this one was "
                   "built with the default (CPU) preset"});
  // What runs on a GPU: training (the FSDP engine, every strategy) and inference (one rank,
  // or sharded), in fp32, fp16 or bf16. The int8 formats (LibTorch's CPU quantized
  // engines), the compressed collectives (host codecs), sharded checkpoints and the
  // collective micro-benchmarks keep host tensors.
  const std::string& task = sb::base_config(p).task;
  const bool infer = task == "infer";
  if (!infer && task != "train")
    out.push_back({"device", fmt::format("device = \"cuda\" runs task = \"train\" or "
                                         "\"infer\"; set device = \"cpu\" for task = \"{}\"",
                                         task)});
  if (task == "train") {
    const std::string& compression = sb::config<sb::TrainChoice>(p).compression;
    if (compression != "none")
      out.push_back({"compression", fmt::format("compression = \"{}\" runs its codecs on host "
                                                "tensors; on device = \"cuda\" use "
                                                "compression = \"none\"", compression)});
    // The train area's keys (declared there).
    for (const char* k : {"checkpoint_dir", "export_safetensors"})
      if (p.has(k) && !p.get_string(k).empty())
        out.push_back({k, fmt::format("{} writes host buffers; on device = \"cuda\" leave it "
                                      "empty (sharded checkpoints of GPU runs are not "
                                      "implemented yet)", k)});
    // The disk store streams AdamW through host staging buffers (fsdp/offload_store.h);
    // refused here, so that fit never chooses it for a GPU point either.
    for (const char* k : {"offload_optimizer", "offload_param"})
      if (p.has(k) && p.get_string(k) == "disk")
        out.push_back({k, fmt::format("{} = \"disk\" streams the update through host buffers on the "
                                      "CPU; on device = \"cuda\" use \"none\" (a GPU run's optimizer state "
                                      "in host memory, ZeRO-Offload's, is not built)", k)});
  }
  const std::string& q = sb::config<sb::InferChoice>(p).quantization;
  if (infer && q != "none" && q != "fp16" && q != "bf16")
    out.push_back({"quantization", fmt::format("quantization = \"{}\" runs on CPU only "
                                               "(LibTorch's int8 engines); on device = "
                                               "\"cuda\" use none, fp16 or bf16", q)});
}

const sb::Registrar kRegister([] {
  sb::register_name("device", "cpu", "host tensors (intra-op threads: the `threads` key)");
  sb::register_name("device", "cuda",
                    "this rank's GPU (local rank modulo the GPUs visible); needs the CUDA build");
});
}  // namespace

void DeviceConfig::declare(sb::Fields<DeviceConfig>& f) {
  f.name("device", &DeviceConfig::device, "device", "cpu",
         "where tensors live and compute runs: cpu, or cuda (one GPU per rank)");
  f.validate(validate);
}
SB_CONFIG_SECTION(DeviceConfig);

}  // namespace sb::models
