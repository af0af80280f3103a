// A collective made of plain ones (the compressed collectives, compressed_collectives.h):
// each phase is local work around one plain collective on buffers that work makes. It names
// no library: the Communicator runs each phase's plain collective on the backend it routes
// those buffers to, like any plain collective (Communicator::issue).
#pragma once
#include <functional>
#include <vector>

#include "workloads/comm/backend.h"
#include "workloads/comm/progress_engine.h"

namespace sb::comm {

struct CompositePhase {
  // Where the phase starts (progress_engine.h: the communication thread or the caller):
  // compress into wire buffers.
  std::function<void()> prepare;
  // The plain collective, on what prepare made (uint8 wires: all_gather, all_to_all).
  std::function<CollArgs()> args;
  std::function<void()> after;  // after it completed: decompress, reduce
};

struct Composite {
  std::vector<CompositePhase> phases;
  detail::Span reads, writes;  // the caller's memory (Collective::reads)
};

}  // namespace sb::comm
