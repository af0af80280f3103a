// SB_FAULT parsing and injection (see fault.h).
#include "harness/core/fault.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "harness/core/check.h"

namespace sb {
namespace {

struct Fault {
  bool armed = false;
  std::string site, kind;
  int rank = -1;
  std::int64_t step = 0;
};

// Parsed once; a malformed SB_FAULT is an error at the first fault_point() (tests only).
const Fault& fault() {
  static const Fault f = [] {
    Fault r;
    const char* env = std::getenv("SB_FAULT");
    if (!env || !*env) return r;
    char site[64] = {0}, kind[16] = {0};
    long long step = 0;
    if (std::sscanf(env, "%63[^:]:%d:%lld:%15s", site, &r.rank, &step, kind) != 4)
      SB_FAIL("SB_FAULT=\"{}\" is not <site>:<rank>:<step>:<throw|kill|stop|hang>", env);
    r.site = site, r.kind = kind, r.step = step;
    SB_CHECK(r.kind == "throw" || r.kind == "kill" || r.kind == "stop" || r.kind == "hang",
             "SB_FAULT kind \"{}\": use throw, kill, stop or hang", r.kind);
    r.armed = true;
    return r;
  }();
  return f;
}

std::atomic<int> g_rank{-1};
std::atomic<std::int64_t> g_step{-1};
std::atomic<bool> g_fired{false};

}  // namespace

void fault_set_rank(int rank) { g_rank = rank; }
void fault_set_step(std::int64_t step) { g_step = step; }

void fault_point(const char* site) {
  const Fault& f = fault();
  if (!f.armed || f.rank != g_rank.load() || g_step.load() < f.step || f.site != site) return;
  if (g_fired.exchange(true)) return;
  const double now = std::chrono::duration<double>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
  // The test reads this line to time how long the other ranks take to go.
  std::fprintf(stderr, "shardbench fault: %s at %s, rank %d, step %lld, unix time %.3f\n",
               f.kind.c_str(), site, f.rank, static_cast<long long>(g_step.load()), now);
  std::fflush(stderr);
  if (f.kind == "kill") std::raise(SIGKILL);
  if (f.kind == "stop") {
    std::raise(SIGSTOP);  // every thread stops; only SIGCONT or SIGKILL (the launcher's) go on
    return;
  }
  if (f.kind == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  SB_FAIL("injected fault (SB_FAULT) at {}, step {}", site, g_step.load());
}

}  // namespace sb
