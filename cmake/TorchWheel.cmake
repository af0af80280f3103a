# LibTorch comes from the PyPI torch wheel that jobscripts/install-deps.sh installs into the
# git-ignored virtual environment .venv (docs/DEVELOPERS.md "LibTorch"): one LibTorch for the
# CPU and the CUDA build. The wheel's prefix goes first in CMAKE_PREFIX_PATH so that its
# TorchConfig.cmake finds the wheel's own libraries, never another LibTorch on the system
# (Debian's libtorch-dev puts a libtorch.so on the default search path).
set(SHARDBENCH_PYTHON "${CMAKE_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python of the virtual environment holding the torch wheel")
if(NOT EXISTS "${SHARDBENCH_PYTHON}")
  message(FATAL_ERROR "shardbench: ${SHARDBENCH_PYTHON} does not exist. LibTorch comes from the "
          "torch wheel in .venv: run jobscripts/install-deps.sh (or pass "
          "-DSHARDBENCH_PYTHON=<python with torch installed>).")
endif()
execute_process(
  COMMAND "${SHARDBENCH_PYTHON}" -c
          "import os, torch; print(os.path.dirname(torch.__file__)); print(torch.__version__)"
  OUTPUT_VARIABLE _sb_torch OUTPUT_STRIP_TRAILING_WHITESPACE
  ERROR_VARIABLE _sb_torch_err RESULT_VARIABLE _sb_torch_rc)
if(NOT _sb_torch_rc EQUAL 0)
  message(FATAL_ERROR "shardbench: '${SHARDBENCH_PYTHON} -c \"import torch\"' failed:\n"
          "${_sb_torch_err}\nReinstall the wheel with jobscripts/install-deps.sh.")
endif()
string(REPLACE "\n" ";" _sb_torch "${_sb_torch}")
list(GET _sb_torch 0 SHARDBENCH_TORCH_ROOT)
list(GET _sb_torch 1 SHARDBENCH_TORCH_WHEEL_VERSION)
list(PREPEND CMAKE_PREFIX_PATH "${SHARDBENCH_TORCH_ROOT}" "${SHARDBENCH_TORCH_ROOT}/share/cmake")
# The wheel is a CUDA build: its TorchConfig needs the CUDA toolkit (nvcc, headers) to
# configure, even for the CPU preset (install-deps.sh checks for it); without a GPU nothing
# of it runs.
if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  set(TORCH_CUDA_ARCH_LIST "9.0")  # H100/H200; the CUDA preset sets its own
endif()
# A build folder configured against another LibTorch keeps its location in the cache.
foreach(_v Torch_DIR Caffe2_DIR TORCH_LIBRARY c10_LIBRARY)
  if(DEFINED CACHE{${_v}})
    cmake_path(IS_PREFIX SHARDBENCH_TORCH_ROOT "${${_v}}" _sb_in_wheel)
    if(NOT _sb_in_wheel)
      message(STATUS "shardbench: forgetting ${_v}=${${_v}} (not the wheel's)")
      unset(${_v} CACHE)
    endif()
  endif()
endforeach()
find_package(Torch REQUIRED)
cmake_path(IS_PREFIX SHARDBENCH_TORCH_ROOT "${TORCH_LIBRARY}" _sb_ours)
if(NOT _sb_ours)
  message(FATAL_ERROR "shardbench: found LibTorch at ${TORCH_LIBRARY}, not in the wheel at "
          "${SHARDBENCH_TORCH_ROOT}. Remove the other LibTorch (Debian: apt remove libtorch-dev) "
          "or reconfigure in a fresh build folder.")
endif()
message(STATUS "shardbench: LibTorch ${SHARDBENCH_TORCH_WHEEL_VERSION} from ${SHARDBENCH_TORCH_ROOT}")

# The wheel's CUDA libraries (nvidia-*/cuda-toolkit wheels beside torch) are newer than the
# toolkit's: libtorch_cuda needs symbols of the wheel's NCCL, not /usr/local/cuda's. The
# linker resolves the libraries' own dependencies from these folders; at run time the wheel's
# RUNPATHs ($ORIGIN/...) find them.
file(GLOB _sb_nvidia_libs LIST_DIRECTORIES true "${SHARDBENCH_TORCH_ROOT}/../nvidia/*/lib")
foreach(_d IN LISTS _sb_nvidia_libs)
  add_link_options("LINKER:-rpath-link,${_d}")
endforeach()

# The wheel bundles fmt headers of another version (12) than Debian's libfmt-dev (the library
# we link): put Debian's headers ahead of LibTorch's include folders, through a folder that
# holds only fmt (the system include folder itself cannot be moved ahead with -isystem).
# The folder is in the checkout (build-include/, git-ignored), the same for every preset, so
# that compile commands and with them ccache entries are shared between build folders.
get_target_property(_sb_fmt_inc fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
if(NOT _sb_fmt_inc)
  set(_sb_fmt_inc /usr/include)
endif()
list(GET _sb_fmt_inc 0 _sb_fmt_inc)
file(MAKE_DIRECTORY "${CMAKE_SOURCE_DIR}/build-include")
file(CREATE_LINK "${_sb_fmt_inc}/fmt" "${CMAKE_SOURCE_DIR}/build-include/fmt" SYMBOLIC)
include_directories(BEFORE SYSTEM "${CMAKE_SOURCE_DIR}/build-include")
