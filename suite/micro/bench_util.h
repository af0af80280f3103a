// Small helpers the micro-benchmark programs share (their own flags, a clock).
#pragma once
#include <sched.h>

#include <chrono>
#include <cstdio>
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

}  // namespace sb::bench
