#!/usr/bin/env bash
# Configures and builds shardbench with the default preset (build/), through ccache.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${SB_BUILD_JOBS:-$(nproc)}
cmake --preset default >/dev/null
cmake --build --preset default -j "$jobs"
