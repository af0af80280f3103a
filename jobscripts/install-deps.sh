#!/usr/bin/env bash
# Installs the Debian 12 packages shardbench needs (idempotent: apt runs only when one is missing)
# and the torch wheel (LibTorch) into .venv. Run as root (or with sudo available). The list is
# also in DEVELOPERS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  python3-venv                               # .venv: the torch wheel (LibTorch), below
  libgloo-dev                                # Gloo headers for c10d (the wheel ships none)
  libopenmpi-dev openmpi-bin                 # MPI
  libhdf5-dev libfmt-dev libcli11-dev libtomlplusplus-dev nlohmann-json3-dev
  libgtest-dev libbenchmark-dev              # tests and micro-benchmarks
  slurmctld slurmd slurm-client munge        # the single-node Slurm cluster used by tests
  python3 python3-h5py python3-pandas python3-matplotlib python3-scipy python3-pytest
  python3-mpi4py                             # the micro task's Python twin (OMB-Py), below
  python3-optuna                             # shardbench search (TPE sampler)
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

# The torch wheel is a CUDA build: configuring against it needs the CUDA toolkit (nvcc and
# its headers), also for the CPU build. Debian 12 does not package CUDA 13; our machines have
# it in /usr/local/cuda.
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "install-deps: the CUDA toolkit (nvcc) is missing: install CUDA 13 (NVIDIA's packages," \
       "to /usr/local/cuda) and rerun; the torch wheel's CMake files need it to configure" >&2
  exit 1
fi

# LibTorch: the PyPI torch wheel in the git-ignored virtual environment .venv of this
# checkout (CMake finds it through cmake/TorchWheel.cmake). Pinned: docs/DEVELOPERS.md
# "LibTorch" says why this version. One wheel serves the CPU and the CUDA build (its CUDA
# libraries come as nvidia-* / cuda-toolkit wheels; without a GPU they are loaded, not used).
TORCH_VERSION=${SB_TORCH_VERSION:-2.15.0}
venv=$PWD/.venv
have=$("$venv/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [[ $have != "$TORCH_VERSION" ]]; then
  echo "install-deps: installing torch $TORCH_VERSION into $venv (was: ${have:-none}; ~5 GB, 2 min)"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION"
else
  echo "install-deps: torch $TORCH_VERSION present in $venv"
fi

# Hugging Face transformers beside torch, for one test only: an exported model folder loads
# into GPT2LMHeadModel / BertFor* with the same logits (tests/unit/data_safetensors.cpp).
# Pinned with its dependencies resolved by pip; nothing of it is linked or needed at run time.
TRANSFORMERS_VERSION=${SB_TRANSFORMERS_VERSION:-5.25.0}
have=$("$venv/bin/python" -c 'import transformers; print(transformers.__version__)' 2>/dev/null || true)
if [[ $have != "$TRANSFORMERS_VERSION" ]]; then
  echo "install-deps: installing transformers $TRANSFORMERS_VERSION into $venv (was: ${have:-none})"
  "$venv/bin/pip" install -q --disable-pip-version-check "transformers==$TRANSFORMERS_VERSION"
else
  echo "install-deps: transformers $TRANSFORMERS_VERSION present in $venv"
fi

# mpi4py for the micro task's Python twin (workloads/micro/omb_py.py, micro.impl mpi4py-*),
# which runs under .venv's interpreter (torch tensors). Debian's python3-mpi4py is built
# against Debian's Open MPI (the one shardbench links) for this CPython 3.11: linked into
# .venv rather than built from PyPI's source (its generated MPI.c takes over 20 GB of memory
# to compile at -O2 -g).
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [[ ! -e $site/mpi4py ]]; then
  echo "install-deps: linking Debian's mpi4py into $venv"
  ln -sfn /usr/lib/python3/dist-packages/mpi4py "$site/mpi4py"
fi
