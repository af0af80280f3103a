// The pruning keys, typed (harness/spec/config.h), declared once in prune_keys.cpp with their
// cross-key rules: the method and its target for every task that prunes, the gradual schedule
// of train, and the conversion's options of infer and serve.
#pragma once
#include <cstdint>
#include <string>

namespace sb {
template <class S> class Fields;
}

namespace sb::prune {

// Tasks infer, serve, train.
struct PruneKeys {
  std::string method;  // `pruning`: a registered pruner or "none"
  double sparsity = 0;  // pruning.sparsity
  std::string scope;    // pruning.scope: magnitude's threshold, global or per layer
  static void declare(Fields<PruneKeys>& f);
};

// Task train: gradual pruning's schedule (schedule.h).
struct PruneScheduleKeys {
  std::string schedule;      // pruning.schedule
  double begin = 0, end = 0;  // fractions of steps
  std::int64_t every = 1;    // steps between pruning events
  static void declare(Fields<PruneScheduleKeys>& f);
};

// Tasks infer, serve: the one-time conversion's options.
struct PruneConvertKeys {
  std::string importance;            // pruning.importance
  std::int64_t taylor_batches = 0;   // pruning.taylor_batches
  std::string export_folder;         // pruning.export_folder ("" = none)
  std::string kernel;                // pruning.kernel
  static void declare(Fields<PruneConvertKeys>& f);
};

}  // namespace sb::prune
