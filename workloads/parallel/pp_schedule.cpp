// The pipeline schedules' registry and the simulator (pp_schedule.h).
#include "workloads/parallel/pp_schedule.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/core/check.h"
#include "harness/workload.h"

namespace sb::parallel {
namespace {
std::vector<PpScheduleInfo>& registry() {
  static std::vector<PpScheduleInfo> r;
  return r;
}
}  // namespace

void register_pp_schedule(PpScheduleInfo info) {
  for (const auto& s : registry())
    SB_CHECK(s.name != info.name, "pipeline schedule \"{}\" registered twice", info.name);
  sb::register_name("pp_schedule", info.name, info.doc);
  registry().push_back(std::move(info));
}

std::vector<std::string> pp_schedule_names() {
  std::vector<std::string> v;
  for (const auto& s : registry()) v.push_back(s.name);
  std::sort(v.begin(), v.end());
  return v;
}

const PpScheduleInfo& find_pp_schedule(const std::string& name) {
  for (const auto& s : registry())
    if (s.name == name) return s;
  SB_FAIL("unknown pipeline schedule \"{}\"; known: {}", name, fmt::join(pp_schedule_names(), ", "));
}

std::string pp_schedule_refuses(const PpScheduleInfo& s, int pp, int m, int v) {
  if (pp < 1 || m < 1 || v < 1)
    return fmt::format("pp ({}), microbatches ({}) and virtual stages ({}) must be >= 1", pp, m, v);
  if (!s.virtual_stages && v != 1)
    return fmt::format("pp_schedule = \"{}\" runs one stage per rank, not {}: set "
                       "pp_virtual_stages = 1 or pp_schedule = \"interleaved_1f1b\"", s.name, v);
  if (s.needs_divisible && m % pp != 0)
    return fmt::format("pp_schedule = \"{}\" needs microbatches ({}) divisible by mesh.pp ({}): "
                       "set microbatches to a multiple of {}", s.name, m, pp, pp);
  return "";
}

double ideal_bubble(int pp, int m, int v) {
  return static_cast<double>(pp - 1) / (static_cast<double>(v) * m + pp - 1);
}

PpSimulation simulate(const PpPlan& plan, int pp, int m, int v, double tf, double tb) {
  SB_CHECK(static_cast<int>(plan.size()) == pp, "the plan has {} ranks, pp = {}", plan.size(), pp);
  const int stages = pp * v;
  // done[f/b][stage][mb]: completion time, or +inf while not run.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> fdone(stages, std::vector<double>(m, inf)), bdone = fdone;
  std::vector<std::size_t> next(pp, 0);
  std::vector<double> free_at(pp, 0.0);
  PpSimulation sim;
  sim.busy.assign(pp, 0.0);
  sim.peak_in_flight.assign(pp, 0);
  std::vector<int> in_flight(pp, 0);
  const double af = tf / v, ab = tb / v;
  for (;;) {
    bool progressed = false, left = false;
    for (int r = 0; r < pp; ++r) {
      if (next[r] == plan[r].size()) continue;
      left = true;
      const PpAction& a = plan[r][next[r]];
      SB_CHECK(a.chunk >= 0 && a.chunk < v && a.microbatch >= 0 && a.microbatch < m,
               "rank {}: action {} names chunk {} / micro-batch {} outside {} x {}", r, next[r],
               a.chunk, a.microbatch, v, m);
      const int s = a.chunk * pp + r;
      double ready = 0;
      if (a.forward) {
        SB_CHECK(fdone[s][a.microbatch] == inf, "rank {} runs forward {} of stage {} twice", r,
                 a.microbatch, s);
        ready = s > 0 ? fdone[s - 1][a.microbatch] : 0.0;
      } else {
        SB_CHECK(bdone[s][a.microbatch] == inf, "rank {} runs backward {} of stage {} twice", r,
                 a.microbatch, s);
        ready = std::max(fdone[s][a.microbatch], s + 1 < stages ? bdone[s + 1][a.microbatch] : 0.0);
      }
      if (ready == inf) continue;  // its input is not there yet
      const double start = std::max(ready, free_at[r]), t = a.forward ? af : ab;
      free_at[r] = start + t;
      (a.forward ? fdone : bdone)[s][a.microbatch] = start + t;
      sim.busy[r] += t;
      in_flight[r] += a.forward ? 1 : -1;
      sim.peak_in_flight[r] = std::max(sim.peak_in_flight[r], in_flight[r]);
      ++next[r];
      progressed = true;
    }
    if (!left) break;
    SB_CHECK(progressed, "the pipeline schedule deadlocks: no rank's next action can run "
             "(rank 0 is at action {} of {})", next[0], plan[0].size());
  }
  for (int s = 0; s < stages; ++s)
    for (int mb = 0; mb < m; ++mb)
      SB_CHECK(fdone[s][mb] != inf && bdone[s][mb] != inf,
               "the schedule never runs the {} of micro-batch {} on stage {}",
               fdone[s][mb] == inf ? "forward" : "backward", mb, s);
  sim.makespan = *std::max_element(free_at.begin(), free_at.end());
  return sim;
}

}  // namespace sb::parallel
