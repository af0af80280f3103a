// `shardbench plan SUITE`: validate and expand a suite, print its points (and any warnings, to
// stderr); exit 2 listing every diagnostic when the suite is invalid.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/core/machine.h"
#include "harness/launch/launcher.h"
#include "harness/spec/plan.h"
#include "harness/workload.h"

namespace sb::cli {
namespace {

Registrar reg([] {
  register_command({"plan", "Validate a suite and print its expanded points", [](CLI::App& sub) {
    auto file = std::make_shared<std::string>();
    sub.add_option("suite", *file, "suite file (suite/*.toml)")->required();
    sub.callback([file] {
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
      std::fputs(format_plan(s).c_str(), stdout);
    });
  }});
});

}  // namespace
}  // namespace sb::cli
