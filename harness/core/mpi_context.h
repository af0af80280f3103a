// The MPI set-up of one process of a run point, and the few collectives the harness needs
// (strings to rank 0). Everything multi-process in harness/ goes through these calls.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <mpi.h>

namespace sb {

// Initializes MPI with MPI_THREAD_MULTIPLE (workloads may communicate from helper threads),
// sets sb::set_rank_identity and finalizes in the destructor. One per process.
class MpiContext {
 public:
  MpiContext(int* argc, char*** argv);
  ~MpiContext();
  MpiContext(const MpiContext&) = delete;
  MpiContext& operator=(const MpiContext&) = delete;

  MPI_Comm world() const { return MPI_COMM_WORLD; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& host() const { return host_; }

 private:
  int rank_ = 0, size_ = 1;
  std::string host_;
};

// Throws sb::Error "<what> failed: <MPI's error string>" unless rc is MPI_SUCCESS. The only
// MPI error-string helper: harness and workloads call this one.
void check_mpi(int rc, const char* what);

// ---- The one failure path under MPI ---------------------------------------------------
// Called once with the reason before MPI_Abort (`shardbench run` records the failed result
// there). Runs at most once per process; it must not wait on other ranks.
void set_failure_hook(void (*hook)(const std::string& reason));
// Prints the reason, runs the failure hook, then MPI_Abort(MPI_COMM_WORLD): every rank ends,
// none waits on a peer. Callable from any thread, also while an exception unwinds.
[[noreturn]] void abort_all(const std::string& reason);
// For destructors that would wait on MPI (a communicator's requests, an engine's gathers):
// when this thread is unwinding an exception the peers may be dead or stuck, so they call
// abort_all() instead of waiting, naming `what` and the last error raised on this rank.
void abort_if_unwinding(const char* what);

// Short host name (gethostname), "unknown" when it fails.
std::string host_name();

// Collective: rank 0 receives every rank's string (index = rank); other ranks get {}.
std::vector<std::string> gather_strings(const std::string& mine, MPI_Comm comm);

// Collective: every rank's bytes concatenated on rank 0, with the per-rank sizes.
std::vector<char> gather_bytes(const std::vector<char>& mine, MPI_Comm comm,
                               std::vector<int>* sizes);

// First line of MPI_Get_library_version ("Open MPI v4.1.4, ..."); callable before MPI_Init.
std::string mpi_library_version();

// Compute threads for this rank: `threads` when > 0, else the node's cores shared evenly by
// the ranks of `world` on this node (MPI_COMM_TYPE_SHARED). Collective over world.
int threads_per_rank(std::int64_t threads, MPI_Comm world);

// This rank's index among the ranks of `world` on its node (MPI_COMM_TYPE_SHARED, in world
// order): which GPU a rank takes. Collective over world.
int node_local_rank(MPI_Comm world);

}  // namespace sb
