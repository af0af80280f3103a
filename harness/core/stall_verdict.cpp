// The stall watchdog's rules and its message (watchdog.h): which rank holds the others up,
// from every rank's last heartbeat. Pure: tested without MPI (tests/harness/test_watchdog.cpp).
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "harness/core/watchdog.h"

namespace sb {
namespace {

// "rank 3", "ranks 0, 2-3, 5".
std::string rank_list(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  std::string out = "ranks ";
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += i ? ", " : "";
    out += j == i ? fmt::format("{}", ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string seconds(double s) { return fmt::format("{:.1f} s", s); }

// "step 2, phase forward, not in a collective; last collective issued: all_gather #14 (...)".
std::string last_heartbeat(const PeerView& v) {
  return fmt::format("step {}, phase {}, {}; last collective issued: {}", v.step, v.phase,
                     v.waiting ? fmt::format("waiting in {} for {}", v.waiting_in,
                                             seconds(v.waited_s))
                               : "not in a collective",
                     v.last_issued.empty() ? "none" : v.last_issued);
}

// Where the ranks in `who` are, grouped by the collective they wait in (the collectives the
// stalled rank holds them in), then those that wait in none.
std::string where_they_wait(const std::vector<PeerView>& ranks, const std::vector<int>& who) {
  std::map<std::string, std::vector<int>> in;  // collective -> ranks waiting in it
  std::map<std::string, double> longest;
  std::vector<int> busy;
  for (int r : who) {
    const PeerView& v = ranks[static_cast<std::size_t>(r)];
    if (!v.waiting) {
      busy.push_back(r);
      continue;
    }
    in[v.waiting_in].push_back(r);
    longest[v.waiting_in] = std::max(longest[v.waiting_in], v.waited_s);
  }
  std::vector<std::string> parts;
  for (const auto& [coll, rs] : in)
    parts.push_back(fmt::format("{} {} in {} (for {})", rank_list(rs),
                                rs.size() == 1 ? "waits" : "wait", coll, seconds(longest[coll])));
  if (!busy.empty()) {
    const PeerView& v = ranks[static_cast<std::size_t>(busy[0])];
    parts.push_back(fmt::format("{} {} in no collective (phase {}, step {})", rank_list(busy),
                                busy.size() == 1 ? "is" : "are", v.phase, v.step));
  }
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out;
}

enum class Why { Silent, Stuck, AllWait };

std::string message(const std::vector<PeerView>& ranks, const std::vector<int>& live,
                    const std::vector<int>& blamed, Why why, double timeout_s) {
  const std::string limit = fmt::format("stall_timeout {:g} s", timeout_s);
  std::vector<int> others;
  for (int r : live)
    if (!std::binary_search(blamed.begin(), blamed.end(), r)) others.push_back(r);
  if (why == Why::AllWait)
    return fmt::format("every rank has waited in a collective for over {} ({}): a deadlock, a "
                       "collective issued on some ranks only, or a hung network or device. {}. "
                       "If a collective may take this long, raise stall_timeout (0 turns the "
                       "watchdog off)", seconds(timeout_s), limit, where_they_wait(ranks, live));
  std::string out;
  const std::size_t shown = std::min<std::size_t>(blamed.size(), 4);
  for (std::size_t i = 0; i < shown; ++i) {
    const PeerView& v = ranks[static_cast<std::size_t>(blamed[i])];
    const std::string what =
        why == Why::Silent
            ? fmt::format("no heartbeat for {} ({}): its process is stopped or hung in the "
                          "kernel, or its node is lost", seconds(v.silent_s), limit)
            : fmt::format("alive but no progress for {} outside any collective ({}) while "
                          "other ranks wait for it", seconds(v.progress_age_s), limit);
    out += fmt::format("{}rank {} on {} stalled: {}. Its last heartbeat: {}", i ? ". Also " : "",
                       v.rank, v.host, what, last_heartbeat(v));
  }
  if (blamed.size() > shown)
    out += fmt::format(". Also stalled: {}", rank_list({blamed.begin() + shown, blamed.end()}));
  out += others.empty() ? ". No other rank is running"
                        : fmt::format(". The others: {}", where_they_wait(ranks, others));
  out += fmt::format(". If {} {} busy on purpose, raise stall_timeout (0 turns the watchdog "
                     "off)", rank_list(blamed), blamed.size() == 1 ? "was" : "were");
  return out;
}

}  // namespace

double stall_timeout_s(double configured, double median_step_s) {
  if (configured > 0) return configured;
  return std::max(60.0, 10.0 * median_step_s);
}

std::optional<StallVerdict> stall_verdict(const std::vector<PeerView>& ranks, double timeout_s) {
  std::vector<int> live, silent, stuck, waited;
  bool unheard = false;  // a rank we know nothing of may be the one the others wait for
  for (const PeerView& v : ranks) {
    unheard = unheard || !v.heard;
    if (!v.heard || v.done) continue;
    live.push_back(v.rank);
    if (v.silent_s >= timeout_s) silent.push_back(v.rank);
    if (v.waiting && v.waited_s >= timeout_s) waited.push_back(v.rank);
    if (!v.waiting && v.progress_age_s >= timeout_s) stuck.push_back(v.rank);
  }
  // Heartbeats that stopped come first: a stopped rank's last one is stale, whatever it said.
  if (!silent.empty())
    return StallVerdict{silent, message(ranks, live, silent, Why::Silent, timeout_s)};
  if (waited.empty()) return std::nullopt;  // nobody is held up
  if (!stuck.empty())
    return StallVerdict{stuck, message(ranks, live, stuck, Why::Stuck, timeout_s)};
  if (waited.size() == live.size() && !unheard)
    return StallVerdict{{}, message(ranks, live, {}, Why::AllWait, timeout_s)};
  return std::nullopt;  // the ranks outside a collective are still making progress
}

}  // namespace sb
