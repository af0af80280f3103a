// Small helpers the micro-benchmark programs share (their own flags, a clock).
#pragma once
#include <mpi.h>
#include <sched.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace sb::bench {

// The value after `name` on the command line, else `fallback`.
inline std::string arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

// Seconds on the steady clock.
inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The cores this process may run on (its affinity mask).
inline int allowed_cores() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

// Says so when `threads` intra-op threads share fewer cores: `mpirun -np 1` binds its rank to
// one core by default, which halved every figure of a 2-thread benchmark here (gpt2 bf16
// training 222 tokens/s bound, 396 with --bind-to none). Returns whether it warned.
inline bool warn_if_bound(int threads) {
  const int cores = allowed_cores();
  if (cores <= 0 || cores >= threads) return false;
  std::printf("# WARNING: %d threads on %d allowed core(s): the figures below are not this machine's "
              "(run under mpirun with --bind-to none)\n", threads, cores);
  return true;
}

// The intra-op threads from SB_THREADS (default 2), set, and warned about when bound.
inline int set_threads_from_env() {
  const char* te = std::getenv("SB_THREADS");
  const int threads = te ? std::atoi(te) : 2;
  at::set_num_threads(threads);
  warn_if_bound(threads);
  return threads;
}

// main for the engine benchmarks: MPI with MPI_THREAD_MULTIPLE around body, which returns
// before MPI_Finalize so its engines and communicators are gone by then.
inline int mpi_main(int argc, char** argv, int (*body)(int, char**)) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const int rc = body(argc, argv);
  MPI_Finalize();
  return rc;
}

}  // namespace sb::bench
