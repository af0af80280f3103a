// `shardbench compare A B [--fail-if GATE]...`: two results folders or two groups of points
// (FOLDER:key=value) side by side, with regression gates for CI (analysis.compare_runs; its
// exit code: 0 passed, 1 a gate fired, 2 nothing to compare or bad arguments).
#include <memory>

#include <CLI/CLI.hpp>

#include "harness/cli/analysis_module.h"
#include "harness/command.h"

namespace sb::cli {
namespace {
struct CompareArgs {
  std::string a, b;
  std::vector<std::string> gates, metrics;
  bool json = false;
};

const bool registered = [] {
  register_command(
      {"compare", "compare two results folders or groups of points; gates set the exit code",
       [](CLI::App& sub) {
         auto a = std::make_shared<CompareArgs>();
         sub.add_option("a", a->a, "baseline: FOLDER or FOLDER:key=value[,key=value]")->required();
         sub.add_option("b", a->b, "candidate: FOLDER or FOLDER:key=value[,key=value]")->required();
         sub.add_option("--fail-if", a->gates,
                        "regression gate, e.g. 'tokens_per_s < -5%' (repeatable): exit 1 when "
                        "one fires");
         sub.add_option("--metric", a->metrics, "compare only these metrics (repeatable)");
         sub.add_flag("--json", a->json, "print the comparison as JSON");
         sub.callback([a] {
           std::vector<std::string> args{a->a, a->b};
           for (const auto& g : a->gates) args.insert(args.end(), {"--fail-if", g});
           for (const auto& m : a->metrics) args.insert(args.end(), {"--metric", m});
           if (a->json) args.push_back("--json");
           run_analysis_module("analysis.compare_runs", args);
         });
       }});
  return true;
}();
}  // namespace
}  // namespace sb::cli
