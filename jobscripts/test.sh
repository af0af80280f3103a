#!/usr/bin/env bash
# Quick start, step 2 (and CI): install, build, run every test (unit, harness, mpi, slurm,
# analysis). The Slurm tests start and stop their own one-node cluster (ctest fixtures).
set -euo pipefail
cd "$(dirname "$0")/.."
jobscripts/install-deps.sh
jobscripts/build.sh
ctest --preset default -j "${SB_TEST_JOBS:-2}" "$@"
