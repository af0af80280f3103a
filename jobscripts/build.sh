#!/usr/bin/env bash
# Configures and builds shardbench with a CMake preset (default: "default", in build/; "cuda"
# builds build-cuda/ with the GPU code paths, compile and link only where there is no GPU),
# through ccache.
#   jobscripts/build.sh [PRESET]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${SB_BUILD_JOBS:-$(nproc)}
# Without this sloppiness ccache refuses every translation unit that uses the precompiled header.
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
# Paths under the checkout are hashed relative to it: a fresh clone elsewhere (CI) reuses the
# cache of another checkout instead of compiling every LibTorch file again.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
preset=${1:-default}
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$jobs"
