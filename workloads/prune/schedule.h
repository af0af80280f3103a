// Gradual pruning during training (Zhu & Gupta 2017, "To prune, or not to prune"): the train
// task prunes at steps t0, t0 + every, ... up to t1, each time to the schedule's sparsity, and
// the engine keeps the pruned weights at zero while the others train on (fsdp::Engine::
// set_masks). Pure arithmetic: tests/unit/prune_models.cpp.
#pragma once
#include <cstdint>
#include <string>

namespace sb::prune {

struct Schedule {
  std::string kind = "cubic";  // cubic | oneshot
  double sparsity = 0.5;       // the final sparsity s_f
  std::int64_t begin = 0;      // t0: the first pruning step
  std::int64_t end = 0;        // t1: the last (cubic); the final sparsity from here on
  std::int64_t every = 10;     // steps between pruning events (cubic)
};

// The sparsity to prune to before step t, or a negative value when t is not a pruning step.
// cubic: s_t = s_f (1 - (1 - (t - t0) / (t1 - t0))^3) at t = t0 + k every (t <= t1), and at t1;
// oneshot: s_f at t0 only.
double scheduled_sparsity(const Schedule& s, std::int64_t t);

}  // namespace sb::prune
