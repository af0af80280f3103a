// `shardbench fit SUITE`: measure the costs the suite's "auto" keys are chosen from (once per
// results folder; --remeasure again, --costs FILE given), resolve every point as plan will,
// and print each candidate's predicted peak per rank and step time with why it was rejected
// (harness/spec/fit.h; docs/SUITES.md "fit").
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "harness/command.h"
#include "harness/core/check.h"
#include "harness/core/format.h"
#include "harness/core/machine.h"
#include "harness/spec/base_config.h"
#include "harness/spec/fit.h"
#include "harness/spec/plan.h"
#include "harness/spec/suite.h"
#include "harness/workload.h"

namespace sb::cli {
namespace {

Suite load_or_exit(const std::string& file) {
  try {
    return load_suite(file);
  } catch (const SuiteError& e) {
    for (const auto& d : e.diagnostics) std::fprintf(stderr, "%s\n", d.c_str());
    std::fprintf(stderr, "%s: %zu error%s; the suite was not expanded\n", file.c_str(),
                 e.diagnostics.size(), e.diagnostics.size() == 1 ? "" : "s");
    throw Exit{2};
  }
}

// The costs of the points whose task predicts (those left "auto" choose from them; the others
// get their own prediction): those already in the file kept unless remeasure; the missing ones
// measured here and the file rewritten.
FitCosts costs_for(const Suite& collected, const std::string& path, bool remeasure) {
  FitCosts costs;
  if (!remeasure && std::filesystem::exists(path)) costs = read_fit_costs(path);
  bool measured = false;
  for (const Point& p : collected.points) {
    const FitTask* t = p.has("task") ? find_fit(base_config(p).task) : nullptr;
    if (!t) continue;
    const bool chooses = has_auto(p);
    for (const auto& name : t->costs_needed(p)) {
      if (costs.count(name)) continue;
      std::fprintf(stderr, "fit: measuring %s\n", name.c_str());
      try {
        costs[name] = t->measure(name, p);
        measured = true;
      } catch (const std::exception& e) {
        if (chooses)  // its choice needs it
          SB_FAIL("fit: point '{}' leaves keys \"auto\", and choosing them needs the cost {}, which "
                  "could not be measured here: {}", p.name, name, e.what());
        // Only its own prediction does (a GPU point on a login node): left unpredicted.
        std::fprintf(stderr, "fit: %s not measured here (%s); point '%s' gets no prediction\n",
                     name.c_str(), e.what(), p.name.c_str());
      }
    }
  }
  if (measured) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const MachineInfo m = machine_now(host);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path().empty()
                                            ? "." : std::filesystem::path(path).parent_path());
    write_fit_costs(path, costs, fmt::format("{} ({}; {} cores; isa {})", m.host, m.cpu_model,
                                             m.cores, fmt::format("{}", fmt::join(m.isa, " "))));
    std::fprintf(stderr, "fit: costs written to %s\n", path.c_str());
  }
  return costs;
}

std::string format_result(const FitResult& r) {
  std::string out = fmt::format("point {}: budget {} a rank ({})\n", r.point, format_bytes(r.budget), r.budget_why);
  if (r.candidates.size() == 1 && r.candidates[0].choice.empty()) {  // nothing "auto": its prediction
    const auto& f = r.candidates[0].prediction;
    return out + fmt::format("  nothing \"auto\": predicted peak {} a rank{}, step {:.3g} s ({})\n",
                             format_bytes(f.peak_bytes), f.peak_bytes > r.budget ? " (over the budget)" : "",
                             f.step_s, f.detail);
  }
  std::vector<std::string> keys;
  if (!r.candidates.empty())
    for (const auto& [k, v] : r.candidates[0].choice) keys.push_back(k);
  std::string head = "  ";
  for (const auto& k : keys) head += fmt::format("{:<22}", k);
  out += head + fmt::format("{:>12}{:>11}  {}\n", "peak/rank", "step (s)", "verdict");
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    std::string line = "  ";
    for (const auto& [k, v] : c.choice) line += fmt::format("{:<22}", v);
    const bool judged = c.prediction.peak_bytes > 0;
    line += judged ? fmt::format("{:>12}{:>11.3g}", format_bytes(c.prediction.peak_bytes), c.prediction.step_s)
                   : fmt::format("{:>12}{:>11}", "-", "-");
    line += static_cast<int>(i) == r.chosen ? fmt::format("  chosen ({})", c.prediction.detail)
                                            : "  rejected: " + c.rejected;
    out += line + "\n";
  }
  return out;
}

Registrar reg([] {
  register_command({"fit", "Choose the keys a suite leaves \"auto\" from measured costs and print why", [](CLI::App& sub) {
    auto file = std::make_shared<std::string>();
    auto costs_file = std::make_shared<std::string>();
    auto remeasure = std::make_shared<bool>(false);
    sub.add_option("suite", *file, "suite file (suite/*.toml) with keys set to \"auto\"")->required();
    sub.add_option("--costs", *costs_file,
                   "read the costs from this file instead of measuring (a fixture; default "
                   "$SB_FIT_COSTS or results/<suite>/fit-costs.json, measured when absent)");
    sub.add_flag("--remeasure", *remeasure, "measure every cost again and rewrite the costs file");
    sub.callback([file, costs_file, remeasure] {
      set_fit_mode(FitMode::Collect);
      Suite collected;
      try {
        collected = load_or_exit(*file);
      } catch (...) {
        set_fit_mode(FitMode::Resolve);
        throw;
      }
      set_fit_mode(FitMode::Resolve);
      const FitCosts costs = costs_file->empty()
                                 ? costs_for(collected, fit_costs_path(collected.name), *remeasure)
                                 : read_fit_costs(*costs_file);
      set_fit_costs(costs);
      const auto tables = [] {  // also when nothing fits: the tables say why
        for (const auto& r : last_fit_results()) std::fputs((format_result(r) + "\n").c_str(), stdout);
        std::fflush(stdout);
      };
      Suite s;
      try {
        s = load_or_exit(*file);
      } catch (const Exit&) {
        tables();
        throw;
      }
      if (last_fit_results().empty())
        std::fprintf(stderr, "fit: no point of %s has a task that predicts its memory and step time\n", file->c_str());
      else if (std::none_of(collected.points.begin(), collected.points.end(), [](const Point& p) { return has_auto(p); }))
        std::fprintf(stderr, "fit: no point of %s leaves a key \"auto\"; each point's prediction is "
                     "recorded beside its measurements (fit_peak_bytes, fit_step_s)\n", file->c_str());
      tables();
      std::fputs(format_plan(s).c_str(), stdout);
    });
  }});
});

}  // namespace
}  // namespace sb::cli
