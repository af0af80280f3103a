// The `device` key (every task), typed (harness/spec/config.h); declared in device.cpp with
// its plan-time rules. Torch-free, so a torch-free caller can read it too.
#pragma once
#include <string>

#include "harness/spec/config.h"

namespace sb::models {

struct DeviceConfig {
  std::string device;  // "cpu", or "cuda" (this rank's GPU)
  static void declare(Fields<DeviceConfig>& f);
};

}  // namespace sb::models
