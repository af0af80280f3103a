// Fault injection for the failure-path tests (tests/mpi/failure_paths.sh): the environment
// variable SB_FAULT="<site>:<rank>:<step>:<kind>" makes rank <rank> fail at <site> once it
// has reached step <step>. Sites are named where they are checked ("backward": the FSDP
// engine's gradient hook; "collective": a collective's completion on whichever thread
// completes it; "step": the start of a training step). Kinds: "throw" (an sb::Error),
// "kill" (SIGKILL to itself), "stop" (SIGSTOP to itself: the stall watchdog's test of a rank
// whose process stops running) and "hang" (the calling thread sleeps for ever while the
// process lives: a rank stuck in compute). Unset (the normal case), fault_point() costs one
// branch.
#pragma once
#include <cstdint>

namespace sb {

// Tells fault_point() which rank this process is and which step it is in (train calls it at
// the start of every step; -1 before the first).
void fault_set_rank(int rank);
void fault_set_step(std::int64_t step);

// Fails as SB_FAULT says when it names this site, rank and a step <= the current one;
// fires at most once per process. Thread-safe.
void fault_point(const char* site);

}  // namespace sb
