// Pipeline schedules (the Parallel3d issue): the order in which each pipeline rank runs the
// forward and backward passes of its stages over a step's micro-batches. One file each,
// chosen by name (`pp_schedule`), each registering a record that callers ask (never the name):
//   gpipe             pp_gpipe.cpp        every forward, then every backward (GPipe)
//   1f1b              pp_1f1b.cpp         warm-up forwards, then one forward one backward, then
//                                         the remaining backwards (PipeDream-flush, Megatron)
//   interleaved_1f1b  pp_interleaved.cpp  1f1b over v virtual stages per rank (Megatron-LM's
//                                         interleaved schedule; needs microbatches % pp == 0)
// A schedule is data: per rank, a list of actions. simulate() runs the lists with each
// action's dependencies (a forward needs the previous stage's forward of its micro-batch, a
// backward the next stage's backward and its own forward) and fixed action times: the slow,
// obviously correct model the runtime pipeline and its trace are checked against (bubble,
// peak activations, deadlock freedom).
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace sb::parallel {

struct PpAction {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;  // which of this rank's virtual stages (0 .. v-1); stage = chunk * pp + rank
};
using PpPlan = std::vector<std::vector<PpAction>>;  // [rank] -> actions in order

struct PpScheduleInfo {
  std::string name, doc;
  bool virtual_stages = false;        // runs v > 1 chunks per rank
  bool needs_divisible = false;       // microbatches % pp == 0
  std::function<PpPlan(int pp, int microbatches, int v)> make;
};
void register_pp_schedule(PpScheduleInfo info);  // also registers the name for `pp_schedule`
const PpScheduleInfo& find_pp_schedule(const std::string& name);  // the error lists the names
std::vector<std::string> pp_schedule_names();
// Why this schedule cannot run (pp, microbatches, v), naming the key and the fix; "" if it can.
std::string pp_schedule_refuses(const PpScheduleInfo& s, int pp, int microbatches, int v);

struct PpSimulation {
  double makespan = 0;                 // the step, from the first action to the last
  std::vector<double> busy;            // per rank: the sum of its actions' times
  std::vector<int> peak_in_flight;     // per rank: most micro-batch stages forwarded, not yet
                                       // backwarded (their activations are held)
  // Idle over total of rank r: (makespan - busy) / makespan.
  double bubble(int r) const { return makespan > 0 ? (makespan - busy[r]) / makespan : 0; }
};
// Runs plan with a forward of one whole-rank stage taking t_forward and a backward t_backward
// (a virtual stage: those over v). Throws when the plan deadlocks (a rank's next action can
// never run), or runs an action twice or not at all.
PpSimulation simulate(const PpPlan& plan, int pp, int microbatches, int v, double t_forward,
                      double t_backward);

// The schedule's textbook bubble: (p - 1) / (m + p - 1); interleaved (p - 1) / (v m + p - 1).
double ideal_bubble(int pp, int microbatches, int v);

}  // namespace sb::parallel
