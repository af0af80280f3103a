#!/usr/bin/env bash
# Quick start, step 1: install, build, run the quickstart suite locally under mpirun, report.
set -euo pipefail
cd "$(dirname "$0")/.."
jobscripts/install-deps.sh
jobscripts/build.sh
./build/shardbench plan suite/quickstart.toml
./build/shardbench sweep suite/quickstart.toml --results results/quickstart
./build/shardbench report results/quickstart
echo "quickstart: report in results/quickstart/report/report.md (and report.html)"
