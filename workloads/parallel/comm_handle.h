// A communicator crossing LibTorch's autograd: an autograd Function's saved_data holds
// IValues only, so the layers of tp_layers.cpp and sp_layers.cpp pass it as an integer.
#pragma once
#include <cstdint>

#include "workloads/comm/communicator.h"

namespace sb::parallel {

inline std::int64_t comm_handle(comm::Communicator& c) { return reinterpret_cast<std::intptr_t>(&c); }
inline comm::Communicator& comm_from(std::int64_t h) {
  return *reinterpret_cast<comm::Communicator*>(static_cast<std::intptr_t>(h));
}

}  // namespace sb::parallel
