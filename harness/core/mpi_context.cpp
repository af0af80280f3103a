// MPI initialization, host names and gathers to rank 0 for the harness.
#include "harness/core/mpi_context.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <thread>

#include "harness/core/check.h"

namespace sb {

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  std::string h(buf);
  // Slurm and the reports use short names; keep what precedes the first dot.
  return h.substr(0, h.find('.'));
}

MpiContext::MpiContext(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  host_ = host_name();
  set_rank_identity(rank_, host_);
  SB_CHECK(provided >= MPI_THREAD_MULTIPLE,
           "the MPI library provides thread level {} but shardbench needs MPI_THREAD_MULTIPLE "
           "({}); use an MPI built with thread support",
           provided, MPI_THREAD_MULTIPLE);
}

MpiContext::~MpiContext() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  SB_FAIL("{} failed: {} (a peer rank probably failed first; see its message)", what,
          std::string(msg, static_cast<size_t>(len)));
}

namespace {
std::atomic<void (*)(const std::string&)> g_failure_hook{nullptr};
std::atomic<bool> g_aborting{false};
}  // namespace

void set_failure_hook(void (*hook)(const std::string&)) { g_failure_hook = hook; }

void abort_all(const std::string& reason) {
  // A second failure (another thread, or the hook itself failing) goes straight to the abort.
  if (!g_aborting.exchange(true)) {
    std::fprintf(stderr, "shardbench: aborting every rank: %s\n", reason.c_str());
    std::fflush(stderr);
    if (auto hook = g_failure_hook.load()) {
      try {
        hook(reason);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "shardbench: could not record the failure: %s\n", e.what());
      }
    }
  }
  std::fflush(nullptr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; without MPI there is nobody else to stop
}

void abort_if_unwinding(const char* what) {
  if (std::uncaught_exceptions() == 0) return;
  const std::string last = last_error();
  abort_all(fmt::format("[{}] {} destroyed while an exception unwound; aborting instead of "
                        "waiting on peers. Last error raised here: {}",
                        rank_identity(), what, last.empty() ? "(not an sb::Error)" : last));
}

std::vector<char> gather_bytes(const std::vector<char>& mine, MPI_Comm comm,
                               std::vector<int>* sizes) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  SB_CHECK(mine.size() < static_cast<size_t>(INT_MAX),
           "rank {} has {} bytes of records to gather; more than an MPI count can hold",
           rank, mine.size());
  int n = static_cast<int>(mine.size());
  std::vector<int> counts(rank == 0 ? size : 0);
  check_mpi(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm), "MPI_Gather");
  std::vector<int> displs(counts.size());
  long long total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    displs[i] = static_cast<int>(total);
    total += counts[i];
  }
  SB_CHECK(total < INT_MAX, "{} bytes of records to gather on rank 0; more than an MPI count "
                            "can hold (record fewer comm events)", total);
  std::vector<char> all(static_cast<size_t>(total));
  check_mpi(MPI_Gatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(),
                        MPI_CHAR, 0, comm),
            "MPI_Gatherv");
  if (sizes) *sizes = counts;
  return all;
}

std::vector<std::string> gather_strings(const std::string& mine, MPI_Comm comm) {
  std::vector<int> sizes;
  std::vector<char> all = gather_bytes(std::vector<char>(mine.begin(), mine.end()), comm, &sizes);
  std::vector<std::string> out;
  size_t off = 0;
  for (int s : sizes) {
    out.emplace_back(all.data() + off, static_cast<size_t>(s));
    off += static_cast<size_t>(s);
  }
  return out;
}

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(buf, &len);
  std::string v(buf, static_cast<size_t>(len));
  v = v.substr(0, v.find('\n'));
  while (!v.empty() && (v.back() == ' ' || v.back() == '\0')) v.pop_back();
  return v;
}

int threads_per_rank(std::int64_t threads, MPI_Comm world) {
  if (threads > 0) return static_cast<int>(threads);
  MPI_Comm node;
  int local = 1;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / local);
}

int node_local_rank(MPI_Comm world) {
  int rank = 0, local = 0;
  MPI_Comm_rank(world, &rank);
  MPI_Comm node;
  check_mpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type (node-local rank)");
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  return local;
}

}  // namespace sb
