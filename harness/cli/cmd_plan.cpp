// `shardbench plan SUITE`: validate and expand a suite, print its points (and any warnings, to
// stderr); exit 2 listing every diagnostic when the suite is invalid.
#include <cstdio>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/command.h"
#include "harness/core/machine.h"
#include "harness/core/progress.h"
#include "harness/launch/launcher.h"
#include "harness/launch/results.h"
#include "harness/launch/sweep_eta.h"
#include "harness/spec/plan.h"
#include "harness/workload.h"

namespace sb::cli {
namespace {

// The time the whole suite takes here, from the points of it already measured in its default
// results folder (each shape's seconds per step, scaled by steps; sweep_eta.h). Nothing when
// nothing was measured yet: a guess from FLOPs would be off by the machine's noise.
std::string time_estimate(const Suite& s, const std::string& results) {
  std::vector<const Point*> all;
  for (const Point& p : s.points) all.push_back(&p);
  SweepEta eta;
  const std::string dir = results.empty() ? default_results_dir(s) : results;
  const int measured = eta.learn(all, dir);
  if (measured == 0) return "";  // nothing measured yet: no figure rather than a guess
  return fmt::format("time here: about {} for all {} points (from {} done in {}: each shape's "
                     "seconds per step x steps; shapes not run yet take the median)\n",
                     format_duration(eta.remaining(all)), all.size(), measured, dir);
}

Registrar reg([] {
  register_command({"plan", "Validate a suite and print its expanded points", [](CLI::App& sub) {
    auto file = std::make_shared<std::string>();
    auto results = std::make_shared<std::string>();
    auto memory = std::make_shared<bool>(false);
    auto as_json = std::make_shared<bool>(false);
    sub.add_option("suite", *file, "suite file (suite/*.toml)")->required();
    sub.add_flag("--json", *as_json,
                 "print the points as JSON, for programs (`shardbench search`): suite, and per "
                 "point index, id, name and its canonical config");
    sub.add_flag("--memory", *memory,
                 "also print each point's memory model per rank, term by term (parameters, "
                 "gradients, optimizer, compression, gathered, activations, offload)");
    sub.add_option("--results", *results,
                   "results folder whose done points time the estimate (default "
                   "results/<suite name>)");
    sub.callback([file, results, memory, as_json] {
      Suite s;
      try {
        s = load_suite(*file);
      } catch (const SuiteError& e) {
        for (const auto& d : e.diagnostics) std::fprintf(stderr, "%s\n", d.c_str());
        std::fprintf(stderr, "%s: %zu error%s; the suite was not expanded\n", file->c_str(),
                     e.diagnostics.size(), e.diagnostics.size() == 1 ? "" : "s");
        throw Exit{2};
      }
      // Warnings (e.g. an input file an earlier suite has yet to write) do not fail the plan.
      for (const auto& w : s.warnings) std::fprintf(stderr, "%s\n", w.c_str());
      for (const auto& o : oversubscribed_points(s, usable_cores()))
        std::fprintf(stderr, "warning: %s here: `shardbench sweep` refuses it without "
                     "--allow-oversubscribe (timings would measure contention)\n", o.c_str());
      if (*as_json) {
        nlohmann::json pts = nlohmann::json::array();
        for (const Point& p : s.points)
          pts.push_back({{"index", p.index}, {"id", p.id}, {"name", p.name},
                         {"config", nlohmann::json::parse(p.canonical())}});
        std::puts(nlohmann::json{{"suite", s.name}, {"file", *file}, {"points", pts}}.dump().c_str());
        return;
      }
      std::fputs(format_plan(s).c_str(), stdout);
      if (*memory) std::fputs(format_memory(s).c_str(), stdout);
      // stderr, like the warnings: stdout stays the plan itself, for scripts and diffs.
      std::fputs(time_estimate(s, *results).c_str(), stderr);
    });
  }});
});

}  // namespace
}  // namespace sb::cli
