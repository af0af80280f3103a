#!/usr/bin/env bash
# Installs the Debian 12 packages shardbench needs (idempotent: apt runs only when one is missing).
# Run as root (or with sudo available). The list is also in DEVELOPERS.md.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libopenblas0-openmp           # LibTorch 1.13 (CPU); OpenBLAS or sgemm runs ~18x slower
  libopenmpi-dev openmpi-bin                 # MPI
  libhdf5-dev libfmt-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
  libgtest-dev libbenchmark-dev              # tests and micro-benchmarks
  slurmctld slurmd slurm-client munge        # the single-node Slurm cluster used by tests
  python3 python3-h5py python3-pandas python3-matplotlib python3-scipy python3-pytest
  chromium                                   # report.html in headless Chromium (analysis tests)
)

missing=()
for p in "${PACKAGES[@]}"; do
  [[ $p == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#PACKAGES[@]} packages present"
fi

# LibTorch must use OpenBLAS, not the reference BLAS (which Debian may select by default).
blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | awk '/^Value:/{print $2}')
case "$blas" in
  *openblas*) ;;
  *) echo "install-deps: selecting OpenBLAS (openmp) for libblas.so.3 (was: ${blas:-none})"
     ${SUDO:-} update-alternatives --set libblas.so.3-x86_64-linux-gnu \
       /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3 ;;
esac
