#!/usr/bin/env bash
# The GPU check, on a machine with NVIDIA GPUs and a PyTorch already installed (the CUDA
# build's LibTorch comes from it), within about 8 minutes:
#   1. builds the cuda preset against that PyTorch (only what the check runs),
#   2. runs the tests labelled gpu (tests/gpu: inference, FSDP training on the GPU against
#      the host engine, the nccl backend against mpi),
#   3. one short benchmark: gpt2 (124M), bf16, full_shard over NCCL on every local GPU,
#      B = 8 per GPU x T = 1024, 20 steps (5 warm-up): tokens/s and MFU against the GPU's
#      dense bf16 peak, looked up by its name (table below; SB_GPU_PEAK_TFLOPS overrides),
#      beside the MFU against a bf16 GEMM measured on the GPU in the same run.
# Usage: jobscripts/gpu-check.sh [PYTHON]   (PYTHON: the interpreter whose torch to build
#        against; default $SHARDBENCH_PYTHON, else python3). Needs our other packages
#        (jobscripts/install-deps.sh lists them: MPI, HDF5, fmt, CLI11, toml++, gtest...).
# Prints each figure with the command that made it; exit status 0 when every step passed.
set -euo pipefail
cd "$(dirname "$0")/.."
t_start=$(date +%s)
PY=${1:-${SHARDBENCH_PYTHON:-python3}}
log() { printf '[gpu-check %3ds] %s\n' $(($(date +%s) - t_start)) "$*"; }

# ---- the machine ----------------------------------------------------------------------
command -v nvidia-smi >/dev/null || { echo "gpu-check: nvidia-smi not found: no NVIDIA driver here" >&2; exit 2; }
mapfile -t gpus < <(nvidia-smi --query-gpu=name --format=csv,noheader)
ngpu=${#gpus[@]}
((ngpu > 0)) || { echo "gpu-check: nvidia-smi lists no GPU" >&2; exit 2; }
name=${gpus[0]}
log "$ngpu GPU(s): ${gpus[*]}"
"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
  { echo "gpu-check: $PY's torch cannot see a GPU (CPU-only torch, or a driver mismatch)" >&2; exit 2; }
log "PyTorch $("$PY" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)') from $PY"

# Dense (no sparsity) bf16 tensor-core peak per GPU, TFLOP/s, from NVIDIA's data sheets.
peak_tflops() {
  case $1 in
    *GB200*) echo 2500 ;;
    *B200*) echo 2250 ;;
    *H200*NVL*) echo 835 ;;
    *H200*) echo 989 ;;
    *H100*NVL*) echo 835 ;;
    *H100*PCIe*) echo 756 ;;
    *H100*|*H800*) echo 989 ;;
    *GH200*) echo 989 ;;
    *A100*|*A800*) echo 312 ;;
    *L40S*) echo 362 ;;
    *L40*) echo 181 ;;
    *L4) echo 121 ;;
    *A10G*|*A10) echo 125 ;;
    *"RTX 6000 Ada"*) echo 364 ;;
    *"RTX 4090"*) echo 165 ;;
    *"RTX A6000"*) echo 155 ;;
    *) echo "" ;;
  esac
}
peak=${SB_GPU_PEAK_TFLOPS:-$(peak_tflops "$name")}
[ -n "$peak" ] || { echo "gpu-check: no bf16 peak known for \"$name\": set SB_GPU_PEAK_TFLOPS" >&2; exit 2; }
log "dense bf16 peak of \"$name\": $peak TFLOP/s per GPU${SB_GPU_PEAK_TFLOPS:+ (SB_GPU_PEAK_TFLOPS)}"

# ---- 1. build -------------------------------------------------------------------------
log "configure: cmake --preset cuda -DSHARDBENCH_PYTHON=$PY"
cmake --preset cuda -DSHARDBENCH_PYTHON="$PY" >/tmp/gpu-check-configure.log 2>&1 ||
  { tail -30 /tmp/gpu-check-configure.log; exit 1; }
log "build: cmake --build build-cuda --target shardbench gpu_device_infer gpu_fsdp_train"
cmake --build build-cuda -j "$(nproc)" --target shardbench gpu_device_infer gpu_fsdp_train \
  >/tmp/gpu-check-build.log 2>&1 || { grep -m 20 -B2 -A6 'error' /tmp/gpu-check-build.log; exit 1; }

# ---- 2. the gpu tests -----------------------------------------------------------------
log "tests: ctest --test-dir build-cuda -L gpu"
rc_tests=0
ctest --test-dir build-cuda -L gpu --output-on-failure --timeout 240 || rc_tests=$?

# ---- 3. the benchmark -----------------------------------------------------------------
work=$(mktemp -d /tmp/gpu-check.XXXXXX)
cat >"$work/gpu-check.toml" <<TOML
[suite]
name = "gpu-check"
description = "gpt2 124M, bf16, full_shard over NCCL on every local GPU"
[base]
task = "train"
device = "cuda"
model = "gpt2"
dtype = "bf16"
reduce_dtype = "bf16"
strategy = "full_shard"
comm_backend = "nccl"
world = $ngpu
threads = 1
batch = $((8 * ngpu))
seq = 1024
steps = 20
warmup = 5
eval_batches = 1
time_limit = 300
[axes]
# 0: MFU against a bf16 GEMM measured on the GPU in the run; the spec sheet's peak (GFLOP/s)
peak_gflops = [0.0, $((peak * 1000)).0]
TOML
log "benchmark: build-cuda/shardbench sweep $work/gpu-check.toml ($ngpu rank(s), one per GPU)"
rc_bench=0
build-cuda/shardbench sweep "$work/gpu-check.toml" --results "$work/results" || rc_bench=$?
for f in "$work"/results/logs/*.log; do
  [ -e "$f" ] || continue
  grep -h -E 'tokens/s|state' "$f" | sed "s|^|  $(basename "$f" .log): |" || true
done
log "MFU of the first point: against the same-run GEMM peak; of the second: against $peak TFLOP/s x $ngpu"
log "tests rc=$rc_tests, benchmark rc=$rc_bench, results in $work/results"
[ "$rc_tests" = 0 ] && [ "$rc_bench" = 0 ]
