// SB_REQUIRE_GPU(): skips the calling gpu-labelled test, saying why, unless this build and
// machine can run GPU code (the CUDA build, and a GPU visible to this process).
#pragma once
#include <gtest/gtest.h>

#include "workloads/models/device.h"

#define SB_REQUIRE_GPU()                                                                      \
  do {                                                                                      \
    if (!sb::models::built_with_cuda())                                                     \
      GTEST_SKIP() << "CPU build: configure with cmake --preset cuda to run GPU tests";    \
    if (sb::models::visible_gpus() == 0) GTEST_SKIP() << "no GPU visible to this process";  \
  } while (0)
