// Point-to-point benchmark cases, with the OSU micro-benchmarks' conventions (pipelining's
// traffic; the collectives are collective_case.h). Ranks pair up as (2i, 2i + 1): the even
// rank leads. Shared by the micro task (micro.op = p2p_*) and micro_p2p, so both measure
// the same thing.
//   p2p_latency  osu_latency: ping-pong of `bytes`; one-way latency = round trip / 2
//   p2p_bw       osu_bw: the even rank sends a window of `window` non-blocking messages, the
//                odd one receives them, then returns a 4-byte ack; bandwidth = bytes x window
//                / iteration time
//   p2p_bibw     osu_bibw: both ranks send a window to each other at once, then exchange the
//                ack; bandwidth = 2 x bytes x window / iteration time
// Implementations (the collectives' names):
//   mpi          raw MPI on the world communicator (blocking Send/Recv for the ping-pong,
//                Isend/Irecv/Waitall for a window)
//   ours         sb::comm::Communicator's blocking send/recv (its backend's blocking call on
//                the caller); a window: its non-blocking requests, waited in order
//   ours-async   the Communicator's non-blocking requests everywhere (the ping-pong pre-posts
//                its receive, as a pipeline stage does)
// Inputs are a byte pattern per rank; check() compares every received byte.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <mpi.h>
#include <torch/types.h>

namespace sb::comm { class Communicator; }

namespace sb::micro {

enum class P2PBench { Latency, Bw, Bibw };
// "p2p_latency", "p2p_bw", "p2p_bibw" and their one-line descriptions, in that order.
const std::vector<std::pair<std::string, std::string>>& p2p_benches();
bool is_p2p(const std::string& op);
P2PBench p2p_from_name(const std::string& name);  // the error lists the known names
const char* p2p_bench_name(P2PBench b);

struct P2PConfig {
  P2PBench bench = P2PBench::Latency;
  std::string impl = "mpi";
  std::int64_t bytes = 8;  // one message
  int window = 64;         // messages per iteration of p2p_bw / p2p_bibw (OSU's default)
};

// One iteration's seconds -> one message's and OSU's bandwidth (P2PCase's, without a case).
double p2p_per_message_s(P2PBench b, int window, double iteration_s);
double p2p_bandwidth(P2PBench b, std::int64_t bytes, int window, double iteration_s);

class P2PCase {
 public:
  // world: an even number of ranks. comm: our communicator on the same ranks (ours,
  // ours-async; may be null for mpi).
  P2PCase(const P2PConfig& cfg, MPI_Comm world, comm::Communicator* comm);
  void run();  // one iteration: a round trip, or a window and its ack
  // Fills the send buffers with this rank's pattern, clears the receive buffers, runs once,
  // and counts received bytes that differ from the peer's pattern (0 when correct).
  std::int64_t check();

  // One iteration's seconds -> one message's (the figure the alpha-beta fit takes): the
  // one-way latency (round trip / 2), or the window's time per message.
  double per_message_s(double iteration_s) const;
  // One iteration's seconds -> OSU's bandwidth in bytes/s (bibw counts both directions).
  double bandwidth(double iteration_s) const;
  std::int64_t bytes() const { return cfg_.bytes; }
  int peer() const { return peer_; }  // world rank
  const P2PConfig& config() const { return cfg_; }

 private:
  void latency();
  void window(bool send, bool recv);
  void fill_patterns();
  P2PConfig cfg_;
  MPI_Comm world_;
  comm::Communicator* comm_;
  int rank_ = 0, peer_ = 1;
  bool lead_ = true;
  torch::Tensor send_, recv_, ack_out_, ack_in_;  // recv_: one slot per message of a window
};

struct P2PTiming {
  double mean_s = 0;                  // mean iteration of the slowest rank (max over ranks)
  double rank_min_s = 0, rank_max_s = 0;  // min and max over ranks of the rank's mean
  std::vector<double> local_s;        // this rank's time of every timed iteration
  std::vector<double> start_wtime;    // MPI_Wtime() at the start of every timed iteration
};

// warmup untimed iterations, a barrier, then `iters` back-to-back timed ones (no barrier in
// between, as OSU: a ping-pong synchronises its pair by itself).
P2PTiming time_p2p(P2PCase& c, int warmup, int iters, MPI_Comm world);

}  // namespace sb::micro
