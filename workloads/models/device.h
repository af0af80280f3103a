// The compute device of a point (key `device`): "cpu", or "cuda" = this rank's GPU (the
// local rank modulo the GPUs the node shows, as one rank per GPU expects). One place
// decides, so every workload places tensors the same way and says the same thing when it
// cannot.
#pragma once
#include <string>

#include <torch/types.h>

#include "workloads/models/device_config.h"

namespace sb::models {

// Configured with `cmake --preset cuda` (SHARDBENCH_CUDA: the GPU code paths compiled in).
bool built_with_cuda();
// GPUs this process sees (0 without a GPU, a driver or CUDA_VISIBLE_DEVICES).
int visible_gpus();

// The device `name` ("cpu" or "cuda") means for the rank with this node-local index; throws
// an sb::Error naming the key, the rank and the fix when it cannot run here (no CUDA build,
// no GPU), and makes the GPU this thread's current device. Call it on every rank before the
// first step.
torch::Device resolve_device(const std::string& name, int local_rank);

// "" when d has fast matrix units for `dtype` (kBFloat16, kHalf, kChar = int8 products,
// kFloat: always), else the sentence naming what is missing, for results and benchmark
// notes. CPU: avx512_bf16 or amx_bf16 (bf16), amx_fp16 (fp16), avx512_vnni,
// avx_vnni or amx_int8 (int8); without them oneDNN has no fast kernel and LibTorch's
// fallback runs bf16 GEMMs far slower than fp32 (1 GFLOP/s on an AVX2 EPYC). GPU: tensor
// cores for fp16 and int8, bf16 from compute capability 8.0.
std::string missing_fast_units(const torch::Device& d, torch::ScalarType dtype);

// Waits for the work queued on d (timing GPU work needs it); nothing on CPU.
void synchronize(const torch::Device& d);

// Peak bytes the CUDA caching allocator handed out on d since the process started (tensors,
// not its cache); -1 on CPU or in a build without CUDA.
std::int64_t device_peak_allocated_bytes(const torch::Device& d);

}  // namespace sb::models
