// `shardbench fit` (docs/SUITES.md "fit"): a point may leave some keys as "auto" (the keys its
// task registers: the train task's strategy, activation_checkpoint, seq_chunks,
// offload_optimizer, kv_offload); each combination of their candidates (a name key's
// registered names, an integer key's listed values) is a candidate, checked by plan's
// validators, its peak memory per rank and its step time predicted by the task from measured
// costs (GEMM rate, copy and disk bandwidth; docs/METRICS.md "Fit"); the fastest candidate
// within the point's memory_budget replaces the "auto"s. The harness knows the keys and names
// as data; what a cost means and how a step's time follows from it is the task's.
//
// Costs are measured once by `shardbench fit SUITE` into results/<suite>/fit-costs.json (or
// read from $SB_FIT_COSTS), so every process that loads the suite (plan, sweep, each rank's
// run, a Slurm job) resolves it to the same points. The point's id is its "auto" config's; the
// choice and its prediction ride in its reference figures (fit_peak_bytes, fit_step_s), which
// the result keeps as provenance beside the measured peak and step time. A point with nothing
// "auto" gets its own settings' prediction the same way once the costs file exists.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/spec/point.h"

namespace sb {

class Diagnostics;
using FitCosts = std::map<std::string, double>;  // cost name -> measured value

struct FitPrediction {
  double peak_bytes = 0;  // per rank, the memory model's terms summed
  double step_s = 0;
  std::string detail;     // how step_s splits ("compute 1.20 s + comm 0.31 s + disk 0 s")
  std::string missing;    // a cost the costs lack ("" = none): the candidate cannot be judged
};

struct FitTask {
  std::vector<std::string> keys;  // the keys that may be "auto", varied in this order
  // The costs a point needs (names), and how to measure one here (this process, this machine).
  std::function<std::vector<std::string>(const Point&)> costs_needed;
  std::function<double(const std::string& cost, const Point&)> measure;
  std::function<FitPrediction(const Point&, const FitCosts&)> predict;
  // The point's memory_budget key (bytes a rank; 0 = the default of fit_budget), declared by
  // the task that reads it; negative: the default does not apply (a GPU point) and it must be set.
  std::function<double(const Point&)> memory_budget;
  // Of `keys`, the integer ones and their candidate values (a name key's candidates are its
  // registered names); an integer key left "auto" reads as kAutoInt (config.h) until chosen.
  std::map<std::string, std::vector<std::int64_t>> int_candidates;
};
void register_fit(const std::string& task, FitTask t);  // also registers "auto" for each name key
// Whether an integer key may be given as "auto" (a registered fit task varies it): the suite
// reader accepts the string for it.
bool int_key_may_be_auto(const std::string& key);
const FitTask* find_fit(const std::string& task);

struct FitCandidate {
  std::vector<std::pair<std::string, std::string>> choice;  // key -> name
  FitPrediction prediction;
  std::string rejected;  // why not ("" = it fits)
};
struct FitResult {
  std::string point;  // "3 gpt2-xl/auto/..."
  double budget = 0;
  std::string budget_why;
  std::vector<FitCandidate> candidates;
  int chosen = -1;
};

// Collect: expand() stops before validation and returns the points with their "auto"s (the
// fit command's first pass, to learn which costs to measure). Resolve: the default.
enum class FitMode { Resolve, Collect };
FitMode fit_mode();
void set_fit_mode(FitMode m);
// Costs given in-process (the fit command after measuring; tests), in place of the file.
void set_fit_costs(std::optional<FitCosts> c);
std::string fit_costs_path(const std::string& suite_name);  // $SB_FIT_COSTS or results/<suite>/fit-costs.json
FitCosts read_fit_costs(const std::string& path);           // throws sb::Error naming the file
void write_fit_costs(const std::string& path, const FitCosts& c, const std::string& provenance);

// Called by expand(): each point with an "auto" key of its task's FitTask gets the chosen
// names and the reference figures fit_peak_bytes and fit_step_s; a diagnostic at the key when
// no costs are known or no candidate fits (then it returns true); a point with nothing "auto"
// gets the reference figures of its own settings when the costs file exists (else nothing).
// The results stay readable (last_fit_results()).
bool resolve_auto(const std::string& suite_name, std::vector<Point>& points, Diagnostics& diags);
const std::vector<FitResult>& last_fit_results();
// Whether the point leaves any registered fit key "auto".
bool has_auto(const Point& p);

// The budget per rank: the task's memory_budget when set, else the tightest of RAM, the memory cgroup
// and ulimit -v, over the point's world (as if on one node), less 10% and 512 MiB.
double fit_budget(const Point& p, std::string* why);

}  // namespace sb
