// The "auto" keys' search (fit.h).
#include "harness/spec/fit.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "harness/core/check.h"
#include "harness/core/format.h"
#include "harness/core/memory_limits.h"
#include "harness/spec/base_config.h"
#include "harness/spec/config.h"
#include "harness/spec/expand.h"
#include "harness/workload.h"

namespace sb {
namespace {


std::map<std::string, FitTask>& fit_tasks() {
  static std::map<std::string, FitTask> t;
  return t;
}
FitMode g_mode = FitMode::Resolve;
std::optional<FitCosts> g_costs;
std::vector<FitResult> g_results;

std::vector<std::string> auto_keys(const Point& p, const FitTask& t) {
  std::vector<std::string> out;
  for (const auto& k : t.keys)
    if (p.has(k) && std::holds_alternative<std::string>(p.get(k)) && p.get_string(k) == "auto") out.push_back(k);
  return out;
}

std::vector<std::string> candidates_of(const FitTask& t, const std::string& key) {
  std::vector<std::string> out;
  if (const auto it = t.int_candidates.find(key); it != t.int_candidates.end()) {
    for (const std::int64_t v : it->second) out.push_back(std::to_string(v));
    return out;
  }
  for (const auto& [name, doc] : registered_names(key))
    if (name != "auto") out.push_back(name);
  return out;
}

// A candidate's value as the key's type: an integer key's is a number.
Value fit_value(const FitTask& t, const std::string& key, const std::string& v) {
  if (t.int_candidates.count(key)) return Value{static_cast<std::int64_t>(std::stoll(v))};
  return Value{v};
}

// Every combination of the auto keys' names, the first key slowest.
std::vector<std::vector<std::pair<std::string, std::string>>> combinations(const FitTask& t,
                                                                           const std::vector<std::string>& keys) {
  std::vector<std::vector<std::pair<std::string, std::string>>> out{{}};
  for (const auto& k : keys) {
    std::vector<std::vector<std::pair<std::string, std::string>>> next;
    for (const auto& partial : out)
      for (const auto& name : candidates_of(t, k)) {
        auto c = partial;
        c.emplace_back(k, name);
        next.push_back(std::move(c));
      }
    out = std::move(next);
  }
  return out;
}

FitResult fit_point(const Point& p, std::size_t index, const FitTask& task,
                    const std::vector<std::string>& keys, const FitCosts& costs) {
  FitResult r;
  r.point = fmt::format("{} {}", index, p.name);
  r.budget = fit_budget(p, &r.budget_why);
  for (const auto& choice : combinations(task, keys)) {
    FitCandidate c;
    c.choice = choice;
    Point q = p;
    for (const auto& [k, v] : choice) q.set(k, fit_value(task, k, v), p.where(k));
    canonicalize(q);
    const auto problems = point_problems(q);
    const auto error = std::find_if(problems.begin(), problems.end(), [](const Diagnostic& d) { return !d.warning; });
    if (error != problems.end()) {
      c.rejected = fmt::format("invalid: {}: {}", error->key, error->message);
    } else {
      c.prediction = task.predict(q, costs);
      if (!c.prediction.missing.empty())
        c.rejected = fmt::format("no measured cost '{}': run `shardbench fit` again", c.prediction.missing);
      else if (c.prediction.peak_bytes > r.budget)
        c.rejected = fmt::format("needs {} a rank, over the budget of {}",
                                 format_bytes(c.prediction.peak_bytes), format_bytes(r.budget));
    }
    r.candidates.push_back(std::move(c));
  }
  for (std::size_t i = 0; i < r.candidates.size(); ++i) {
    const auto& c = r.candidates[i];
    if (!c.rejected.empty()) continue;
    if (r.chosen < 0 || c.prediction.step_s < r.candidates[static_cast<std::size_t>(r.chosen)].prediction.step_s)
      r.chosen = static_cast<int>(i);
  }
  for (std::size_t i = 0; i < r.candidates.size(); ++i)  // the fitting ones not chosen: why not
    if (r.candidates[i].rejected.empty() && static_cast<int>(i) != r.chosen)
      r.candidates[i].rejected =
          r.candidates[i].prediction.step_s > r.candidates[static_cast<std::size_t>(r.chosen)].prediction.step_s
              ? fmt::format("slower: {:.3g} s a step against {:.3g} s", r.candidates[i].prediction.step_s,
                            r.candidates[static_cast<std::size_t>(r.chosen)].prediction.step_s)
              : "as fast as the chosen one: the first in this order wins";
  return r;
}

}  // namespace

void register_fit(const std::string& task, FitTask t) {
  for (const auto& k : t.keys)
    if (!t.int_candidates.count(k))
      register_name(k, "auto", "chosen by `shardbench fit` among the other names: the fastest "
                               "predicted step within memory_budget (docs/SUITES.md \"fit\")");
  SB_CHECK(fit_tasks().emplace(task, std::move(t)).second, "fit of task '{}' registered twice", task);
}

bool int_key_may_be_auto(const std::string& key) {
  for (const auto& [task, t] : fit_tasks())
    if (t.int_candidates.count(key)) return true;
  return false;
}

const FitTask* find_fit(const std::string& task) {
  const auto it = fit_tasks().find(task);
  return it == fit_tasks().end() ? nullptr : &it->second;
}

FitMode fit_mode() { return g_mode; }
void set_fit_mode(FitMode m) { g_mode = m; }
void set_fit_costs(std::optional<FitCosts> c) { g_costs = std::move(c); }
const std::vector<FitResult>& last_fit_results() { return g_results; }

bool has_auto(const Point& p) {
  if (!p.has("task")) return false;
  const FitTask* t = find_fit(base_config(p).task);
  return t && !auto_keys(p, *t).empty();
}

std::string fit_costs_path(const std::string& suite_name) {
  const char* env = std::getenv("SB_FIT_COSTS");
  return env && *env ? std::string(env) : fmt::format("results/{}/fit-costs.json", suite_name);
}

FitCosts read_fit_costs(const std::string& path) {
  std::ifstream in(path);
  SB_REQUIRE(in.good(), "{}: no fit costs here; run `shardbench fit SUITE` (it measures this "
                "machine's costs into this file)", path);
  try {
    const auto j = nlohmann::json::parse(in);
    return j.at("costs").get<FitCosts>();
  } catch (const std::exception& e) {
    SB_USER_FAIL("{}: not a fit-costs file ({}); delete it and run `shardbench fit SUITE` again", path, e.what());
  }
}

void write_fit_costs(const std::string& path, const FitCosts& c, const std::string& provenance) {
  nlohmann::json j;
  j["costs"] = c;
  j["measured_on"] = provenance;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    SB_REQUIRE(out.good(), "{}: cannot write the fit costs; check the folder", tmp);
  }
  SB_REQUIRE(std::rename(tmp.c_str(), path.c_str()) == 0, "{}: cannot move {} into place", path, tmp);
}

double fit_budget(const Point& p, std::string* why) {
  const FitTask* task = find_fit(base_config(p).task);
  const double set = task && task->memory_budget ? task->memory_budget(p) : 0.0;
  if (set < 0) {  // the task's default does not apply (a GPU point): nothing fits until it is set
    if (why) *why = "this point's memory is not the host's: set memory_budget to the bytes a rank may hold";
    return 0;
  }
  if (set > 0) {
    if (why) *why = "memory_budget";
    return set;
  }
  const MemoryLimits m = memory_limits();
  double total = std::numeric_limits<double>::infinity();
  for (const std::uint64_t l : {m.address_space, m.cgroup, m.machine})
    if (l > 0) total = std::min(total, static_cast<double>(l));
  const int world = std::max(1, base_config(p).world);
  if (!std::isfinite(total)) total = 0;
  const double budget = std::max(0.0, total / world * 0.9 - 512.0 * 1024 * 1024);
  if (why)
    *why = fmt::format("({}) / {} rank{} x 0.9 - 512 MiB", m.describe(), world, world == 1 ? "" : "s");
  return budget;
}

namespace {
// The suite's costs, read once from its file into `costs` (unless given in-process); false
// when the file does not exist yet.
bool load_costs(const std::string& suite_name, std::optional<FitCosts>& costs) {
  if (costs) return true;
  const std::string path = fit_costs_path(suite_name);
  if (!std::ifstream(path).good()) return false;
  costs = read_fit_costs(path);
  return true;
}

// A point that leaves nothing "auto" still gets the prediction of its own settings, as
// reference figures beside its measured peak and step time (the planner's accuracy, docs/
// METRICS.md "Fit"), when the suite's costs were measured (`shardbench fit`); none else.
// A memory_budget set on such a point is checked against the predicted peak (no costs needed):
// a warning, since the point runs as it is set.
void predict_only(const std::string& suite_name, Point& p, std::size_t index, const FitTask& task,
                  std::optional<FitCosts>& costs, Diagnostics& diags) {
  const bool measured = load_costs(suite_name, costs);
  if (!measured && !(task.memory_budget && task.memory_budget(p) > 0)) return;
  FitResult r;
  try {
    r = fit_point(p, index, task, {}, measured ? *costs : FitCosts{});
  } catch (const std::exception&) {
    return;  // a prediction is provenance: plan's own checks report what is wrong with the point
  }
  const FitCandidate& c = r.candidates.at(0);
  const FitPrediction& f = c.prediction;
  if (r.budget_why == "memory_budget" && f.peak_bytes > r.budget)
    diags.warn(p.where("memory_budget"), "memory_budget",
               fmt::format("point '{}' is predicted to need {} a rank, over its memory_budget of {} "
                           "(`shardbench plan --memory` shows the parts)", p.name,
                           format_bytes(f.peak_bytes), format_bytes(r.budget)));
  if (!measured) return;
  // A cost this point needs was not measured, or the point is invalid (plan says why).
  if (!f.missing.empty() || (!c.rejected.empty() && f.peak_bytes <= 0)) return;
  p.reference["fit_peak_bytes"] = f.peak_bytes;
  p.reference["fit_step_s"] = f.step_s;
  g_results.push_back(std::move(r));
}
}  // namespace

bool resolve_auto(const std::string& suite_name, std::vector<Point>& points, Diagnostics& diags) {
  g_results.clear();
  bool failed = false;
  std::optional<FitCosts> costs = g_costs;
  for (std::size_t i = 0; i < points.size(); ++i) {
    Point& p = points[i];
    if (!p.has("task")) continue;
    const FitTask* task = find_fit(base_config(p).task);
    if (!task) continue;
    const auto keys = auto_keys(p, *task);
    if (keys.empty()) {  // nothing to choose: its prediction only, where costs were measured
      predict_only(suite_name, p, i, *task, costs, diags);
      continue;
    }
    if (!load_costs(suite_name, costs)) {
      diags.add(p.where(keys[0]), keys[0],
                fmt::format("{} = \"auto\" is chosen from this machine's measured costs, and "
                            "{} does not exist yet: run `shardbench fit {}` first", keys[0],
                            fit_costs_path(suite_name), diags.file()));
      return true;
    }
    FitResult r = fit_point(p, i, *task, keys, *costs);
    if (r.chosen < 0) {
      failed = true;
      double least = std::numeric_limits<double>::infinity();
      for (const auto& c : r.candidates)
        if (c.prediction.peak_bytes > 0 && c.rejected.rfind("needs", 0) == 0) least = std::min(least, c.prediction.peak_bytes);
      diags.add(p.where(keys[0]), keys[0],
                fmt::format("no combination of the \"auto\" keys ({}) fits point '{}': {}; the "
                            "budget is {} a rank ({}){}; `shardbench fit {}` lists every "
                            "candidate and why it was rejected", fmt::join(keys, ", "), p.name,
                            std::isfinite(least) ? fmt::format("the smallest valid one needs {}", format_bytes(least))
                                                 : std::string("none is valid"),
                            format_bytes(r.budget), r.budget_why,
                            r.budget_why.find("memory_budget") != std::string::npos
                                ? "" : " (memory_budget sets another, when the ranks will have more)",
                            diags.file()));
    } else {
      const FitCandidate& c = r.candidates[static_cast<std::size_t>(r.chosen)];
      for (const auto& [k, v] : c.choice) p.set(k, fit_value(*task, k, v), p.where(k));
      canonicalize(p);
      p.reference["fit_peak_bytes"] = c.prediction.peak_bytes;
      p.reference["fit_step_s"] = c.prediction.step_s;
    }
    g_results.push_back(std::move(r));
  }
  return failed;
}

}  // namespace sb
