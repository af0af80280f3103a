#!/usr/bin/env bash
# Quick start, step 2 (and CI): install, build (CPU and CUDA presets), run every test (unit,
# harness, mpi, slurm, analysis, gpu: skipped without a GPU). The Slurm tests start and stop
# their own one-node cluster (ctest fixtures).
set -euo pipefail
cd "$(dirname "$0")/.."
jobscripts/install-deps.sh
jobscripts/build.sh
# The CUDA build compiles and links here too (its GPU tests run on a GPU node:
# ctest --test-dir build-cuda -L gpu); it shares the compiler cache with the default one.
jobscripts/build.sh cuda
ctest --preset default -j "${SB_TEST_JOBS:-2}" "$@"
