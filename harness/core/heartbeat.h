// What this rank is doing, for the stall watchdog (watchdog.h): its step, phase, the
// collective it waits in, and a progress counter. Workloads and the communication layer
// update it (cheap stores, callable from any thread); the watchdog's heartbeat thread reads
// a snapshot of it and publishes it to the other ranks. Process-wide: one point per process.
#pragma once
#include <cstdint>
#include <string>

namespace sb::heartbeat {

// The step the rank is in (train: the optimizer step; infer: the query batch; serve: the
// server step). Also a progress event, and the watchdog's step clock: the intervals between
// successive steps give the median step time its automatic timeout scales with.
void set_step(std::int64_t step);
// What the rank does now ("forward", "evaluation", "checkpoint write", ...). `phase` must be
// a string literal (only the pointer is kept). A progress event.
void set_phase(const char* phase);
// Progress inside a long phase (one evaluation batch, one checkpoint file written): a rank
// that ticks is working, not stuck, however long the phase takes.
void tick();

// A collective as the heartbeat names it: "all_gather #12 (param_all_gather, shard group) on
// mpi". op and group are string literals; backend and kind are copied (truncated to 15 and
// 31 bytes), so a heartbeat never points into a communicator that is gone.
struct Collective {
  const char* op = "";
  const char* group = "";
  char backend[16] = {0};
  char kind[32] = {0};
  std::uint64_t seq = 0;  // this rank's count of collectives issued so far, this one included
  Collective() = default;
  Collective(const char* op, const char* group, const std::string& backend,
             const std::string& kind);
  std::string describe() const;
};

// Counts a collective issued on this rank and returns it with its sequence number (ranks
// issue the same sequence, so peers' numbers say who is behind). A progress event.
Collective issued(Collective c);

// While alive, a thread of the rank is blocked on collective c: the caller in a request's
// wait or a blocking collective, the communication thread in a transfer's blocking call or
// its poll loop, MPI_Allreduce of a stop agreement. Scopes may overlap, on one thread
// (nested) or several (the caller waits for a request while the communication thread is in
// an earlier transfer): the rank waits while any is alive, and the oldest names the wait
// (the collective that blocks the others). Entering and leaving are progress.
class Waiting {
 public:
  explicit Waiting(const Collective& c);
  ~Waiting();
  Waiting(const Waiting&) = delete;
  Waiting& operator=(const Waiting&) = delete;

 private:
  int slot_ = -1;  // its entry among the rank's waits (-1: more than the table holds)
};

// Everything the heartbeat says, at one moment. Ages are seconds on this rank's clock, so a
// peer never compares two hosts' clocks.
struct Snapshot {
  std::int64_t step = -1;
  const char* phase = "start";
  std::uint64_t progress = 0;     // progress events so far
  double progress_age_s = 0;      // since the last one
  std::uint64_t issued = 0;       // collectives issued so far
  Collective last_issued;
  bool waiting = false;
  Collective waiting_in;          // valid when waiting: the oldest wait alive
  double waited_s = 0;            // how long it has waited in it
};
Snapshot snapshot();

// The median interval between the last (at most 1024) step starts, in seconds; 0 before two
// steps have started.
double median_step_s();

// Back to the start state (tests; a process runs one point).
void reset();

}  // namespace sb::heartbeat
