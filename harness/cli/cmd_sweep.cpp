// `shardbench sweep SUITE`: every point of a suite on this machine, one after another, through
// the registered scheduler that runs points here (local; --scheduler names another); rerunning
// it resumes where results are missing.
#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/launch/results.h"
#include "harness/launch/scheduler.h"
#include "harness/spec/suite.h"

namespace sb::cli {
namespace {
struct SweepArgs {
  std::string suite, results, scheduler;
  bool retry_failed = false;
  int np_max = 0;
  bool allow_oversubscribe = false;
  std::vector<std::string> only;  // --points
};

const bool registered = [] {
  register_command(
      {"sweep", "run every point of a suite here, skipping points that are done",
       [](CLI::App& sub) {
         auto a = std::make_shared<SweepArgs>();
         sub.add_option("suite", a->suite, "suite file")->required();
         sub.add_option("--results", a->results, "results folder (default results/<suite name>)");
         sub.add_flag("--retry-failed", a->retry_failed, "rerun points recorded as failed");
         sub.add_option("--np-max", a->np_max, "skip points that need more ranks than this");
         sub.add_option("--points", a->only, "run only these points (ids or indices, comma-separated)")
             ->delimiter(',');
         sub.add_option("--scheduler", a->scheduler,
                        "a scheduler that runs points here (default: the one registered)");
         sub.add_flag("--allow-oversubscribe", a->allow_oversubscribe,
                      "run points whose ranks x threads exceed this machine's cores (their "
                      "timings then measure contention)");
         sub.callback([a] {
           const std::string scheduler = choose_scheduler(a->scheduler, /*cluster=*/false);
           const Suite suite = load_suite(a->suite);
           // The plan-time warnings (a missing input file) before anything runs.
           for (const auto& w : suite.warnings) std::fprintf(stderr, "%s\n", w.c_str());
           ScheduleOptions opt;
           opt.results_dir = a->results.empty() ? default_results_dir(suite) : a->results;
           opt.retry_failed = a->retry_failed;
           opt.np_max = a->np_max;
           opt.only = a->only;
           opt.allow_oversubscribe = a->allow_oversubscribe;
           const int code = find_scheduler(scheduler)->schedule(suite, opt);
           if (code != 0) throw Exit{code};
         });
       }});
  return true;
}();
}  // namespace
}  // namespace sb::cli
