// Small helpers the micro-benchmark programs share (their own flags, a clock).
#pragma once
#include <chrono>
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

}  // namespace sb::bench
