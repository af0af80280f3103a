// The stall watchdog: a rank that stops mid-step (SIGSTOP, a hung device, a lost node) ends
// every rank within stall_timeout, with a message that names it, its host, its last phase
// and step, and the collective the others wait in, instead of at the point's time_limit.
//
// Every rank publishes its heartbeat (heartbeat.h: step, phase, progress, the collective it
// waits in) every period, and soon after its step or phase changes, to every other rank as a
// UDP datagram, from a heartbeat thread that beats while the process runs; a watcher thread on every rank keeps each peer's last one.
// Why UDP datagrams, rank to rank: the channel must not need the stalled peer. A datagram to
// a stopped process or a lost node is dropped, never waited for (no connection, no reply);
// nothing is served by one rank (c10d's TCP store, which PyTorch's desync debugging reads,
// lives in rank 0 and stops with it); it crosses nodes (a shared-memory segment covers one
// node only, and a lost node takes its own watchers with it); and it leaves nothing behind
// after a SIGKILL (a shm file would). Addresses are exchanged once over MPI at the start,
// while every rank is alive: loopback between ranks of one node, between nodes the address
// the host name resolves to (else the first non-loopback IPv4 interface's). A peer never
// heard from (UDP blocked between nodes) is not watched, and a warning says so.
//
// Verdicts (stall_verdict): a peer whose heartbeats stop for stall_timeout is stalled (its
// process does not run). A peer that still beats but made no progress for stall_timeout,
// outside any collective, is stalled only while another rank has waited for stall_timeout in
// a collective (it holds the others up: a hung device, an endless loop); a rank that
// computes for long while nobody waits for it is left alone (the time limit bounds it). When
// every rank has waited in a collective for stall_timeout, none is to blame: a deadlock, a
// collective issued on some ranks only (the message lists each rank's), or a hung network.
// The lowest rank that is not stalled reports through sb::abort_all (the one failure path);
// the others follow a few periods later if it did not.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <mpi.h>

#include "harness/core/heartbeat.h"

namespace sb {

// What one rank's last heartbeat said, as a watcher sees it.
struct PeerView {
  int rank = 0;
  std::string host;
  bool heard = false;      // a heartbeat arrived (always, for the watcher's own rank)
  bool done = false;       // the rank finished the point (its last heartbeat said so)
  double silent_s = 0;     // since its last heartbeat arrived (0 for the watcher's own rank)
  std::int64_t step = -1;
  std::string phase;
  double progress_age_s = 0;
  bool waiting = false;
  std::string waiting_in;  // heartbeat::Collective::describe()
  double waited_s = 0;
  std::string last_issued;
};

struct StallVerdict {
  std::vector<int> stalled;  // ranks to blame, ascending (empty: every rank waits)
  std::string message;
};

// The watchdog's rules (see the top of this file) over every rank's view, index = rank.
// timeout_s > 0. No verdict while nothing is stalled.
std::optional<StallVerdict> stall_verdict(const std::vector<PeerView>& ranks, double timeout_s);

// The timeout in force: `configured` > 0 as given (tests use a few seconds); < 0 (automatic)
// 10x the median step time so far (median_step_s), at least 60 s.
double stall_timeout_s(double configured, double median_step_s);

// The watchdog of one point on every rank. Construction is collective over `world` (the
// address exchange); configured as the stall_timeout key (0: none is made, see make).
class Watchdog {
 public:
  Watchdog(MPI_Comm world, double configured_timeout_s);
  ~Watchdog();  // stop()
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  // Tells the peers this rank is done (so its silence is not a stall) and joins the threads.
  // Call once every rank is past its last collective of the point.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Collective over world: a Watchdog, or nullptr when configured_timeout_s == 0 (the same on
// every rank: it is the point's key).
std::unique_ptr<Watchdog> make_watchdog(MPI_Comm world, double configured_timeout_s);

}  // namespace sb
