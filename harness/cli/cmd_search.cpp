// `shardbench search SUITE --objective METRIC [--budget N] [--direction min|max] [--seed S]`:
// adaptive search of a suite's matrix (analysis.search: Optuna's TPE sampler over the keys the
// points vary) instead of running every point. Each proposed point runs through the ordinary
// sweep (`sweep --points`), so its result, the index and the report are as usual; it stops
// after N points it ran, and prints the best point with how much of the matrix it ran.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "harness/cli/analysis_module.h"
#include "harness/command.h"
#include "harness/core/subprocess.h"

namespace sb::cli {
namespace {

struct Args {
  std::string suite, objective, direction, results, compare;
  int budget = 0, seed = 0;
  bool allow_oversubscribe = false;
};

const bool registered = [] {
  register_command({"search", "adaptive search of a suite's matrix for the best point by a metric (Optuna TPE)",
                    [](CLI::App& sub) {
                      auto a = std::make_shared<Args>();
                      sub.add_option("suite", a->suite, "suite file")->required();
                      sub.add_option("--objective", a->objective,
                                     "the metric to optimize: a column of the report's metrics "
                                     "(tokens_per_s, step_time_s, mfu, ...)")->required();
                      sub.add_option("--budget", a->budget, "points to run at most (default: a quarter of the matrix)");
                      sub.add_option("--direction", a->direction,
                                     "max or min (default: min for times and bytes, *_s, *_bytes; else max)");
                      sub.add_option("--seed", a->seed, "the sampler's seed (default 0)");
                      sub.add_option("--results", a->results, "results folder (default results/<suite name>)");
                      sub.add_flag("--allow-oversubscribe", a->allow_oversubscribe,
                                   "passed to the sweep of each point");
                      sub.add_option("--compare", a->compare,
                                     "a results folder holding a full sweep of the suite: print the "
                                     "best configuration's rank among its measurements");
                      sub.callback([a] {
                        std::vector<std::string> args{a->suite, "--objective", a->objective,
                                                      "--shardbench", self_exe(),
                                                      "--seed", std::to_string(a->seed)};
                        if (a->budget > 0) args.insert(args.end(), {"--budget", std::to_string(a->budget)});
                        if (!a->direction.empty()) args.insert(args.end(), {"--direction", a->direction});
                        if (!a->results.empty()) args.insert(args.end(), {"--results", a->results});
                        if (a->allow_oversubscribe) args.push_back("--allow-oversubscribe");
                        if (!a->compare.empty()) args.insert(args.end(), {"--compare", a->compare});
                        run_analysis_module("analysis.search", args);
                      });
                    }});
  return true;
}();

}  // namespace
}  // namespace sb::cli
