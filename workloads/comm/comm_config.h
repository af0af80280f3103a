// The keys that choose the communication backends (tasks train, infer, serve, micro), typed
// (harness/spec/config.h); declared in backend_keys.cpp with their plan-time rules.
#pragma once
#include <string>

#include "harness/spec/config.h"

namespace sb::comm {

struct BackendKeys {
  std::string comm_backend;  // mpi, gloo, nccl or auto (the tuning table's choice)
  std::string comm_tuning;   // the tuning table auto reads and micro.impl = "tune" writes
  static void declare(Fields<BackendKeys>& f);
};

}  // namespace sb::comm
