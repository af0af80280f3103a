// `shardbench status RESULTS`: per point done / failed (reason) / incomplete / running /
// queued / pending, from the result files, the local sweep's marker and squeue.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/command.h"
#include "harness/core/check.h"
#include "harness/core/progress.h"
#include "harness/launch/results.h"
#include "harness/launch/scheduler.h"
#include "harness/trace/result.h"

namespace sb::cli {
namespace {

// True when the folder holds only what `submit --dry-run` writes: job scripts, no manifest.
// Nothing of it was submitted, so there is nothing to list as pending.
bool only_dry_run_scripts(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir + "/manifest.json", ec)) return false;
  for (const auto& e : fs::directory_iterator(dir + "/slurm", ec))
    if (e.path().extension() == ".sbatch") return true;
  return false;
}

struct Row {
  std::int64_t index = 0;
  std::string id, name, state, detail;
  nlohmann::json progress;  // a running point's step, total and ETA (null otherwise)
};

// A running point's progress file (rank 0 writes it, progress.h with_status_file), or null.
nlohmann::json read_progress(const std::string& dir, std::int64_t index, const std::string& id) {
  std::ifstream in(point_progress_path(dir, index, id));
  if (!in) return nullptr;
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

std::map<std::int64_t, std::pair<std::string, std::string>> active_points(
    const std::string& dir, std::vector<std::string>* notes) {
  std::map<std::int64_t, std::pair<std::string, std::string>> active;  // index -> (sched, state)
  for (const auto& name : scheduler_names()) {
    std::string note;
    for (const auto& [index, state] : find_scheduler(name)->active_points(dir, &note))
      active.emplace(index, std::make_pair(name, state));
    if (!note.empty()) notes->push_back(note);
  }
  return active;
}

Row point_row(const std::string& dir, const ManifestPoint& p,
              const std::map<std::int64_t, std::pair<std::string, std::string>>& active) {
  Row r{p.index, p.id, p.name, "", "", nullptr};
  const ResultSummary s = read_result_summary(result_path(dir, p.index, p.id));
  if (s.exists && s.status != "incomplete") {
    r.state = s.status.rfind("unreadable", 0) == 0 ? "unreadable" : s.status;
    r.detail = s.status == "done" ? fmt::format("{} steps", s.steps) : s.failure_reason;
    if (r.state == "unreadable") r.detail = s.status;
  } else if (const auto a = active.find(p.index); a != active.end()) {
    const auto& [sched, st] = a->second;
    r.state = st == "running" || st == "RUNNING" || st == "COMPLETING" ? "running" : "pending";
    // A cluster scheduler's state is its queue's word ("slurm PENDING"); one that runs points
    // here has only "running" to say, so the line says how they run ("local sweep").
    r.detail = scheduler_info(sched).needs_cluster ? sched + " " + st : sched + " sweep";
    if (r.state == "running") {
      r.progress = read_progress(dir, p.index, p.id);
      if (r.progress.is_object() && r.progress.value("total", 0L) > 0) {
        const double eta = r.progress.value("eta_s", -1.0);
        r.detail += fmt::format(", step {}/{}, ETA {}", r.progress.value("done", 0L),
                                r.progress.value("total", 0L),
                                eta >= 0 ? format_duration(eta) : std::string("?"));
      }
    }
  } else if (s.exists) {
    r.state = "incomplete";
    r.detail = s.failure_reason;
  } else {
    r.state = "pending";
  }
  // The first line of a reason; the rest (log lines) is in the file.
  r.detail = r.detail.substr(0, r.detail.find('\n'));
  return r;
}

int status(const std::string& dir, bool json) {
  if (only_dry_run_scripts(dir)) {
    if (json) {
      std::printf("%s\n", nlohmann::json{{"results", dir}, {"submitted", false}, {"points",
                                          nlohmann::json::array()}}.dump(1).c_str());
      return 0;
    }
    std::printf("%s: nothing submitted; it holds only job scripts from `shardbench submit "
                "--dry-run` (%s/slurm), so no point is queued or pending. Submit without "
                "--dry-run to run them.\n", dir.c_str(), dir.c_str());
    return 0;
  }
  const Manifest m = read_manifest(dir);
  std::vector<std::string> notes;
  const auto active = active_points(dir, &notes);
  std::vector<Row> rows;
  std::map<std::string, int> counts;
  for (const auto& p : m.points) {
    rows.push_back(point_row(dir, p, active));
    ++counts[rows.back().state];
  }
  if (json) {
    nlohmann::json pts = nlohmann::json::array();
    for (const auto& r : rows)
      pts.push_back({{"index", r.index}, {"id", r.id}, {"name", r.name}, {"state", r.state},
                     {"detail", r.detail}, {"progress", r.progress}});
    std::printf("%s\n", nlohmann::json{{"results", dir}, {"suite", m.suite},
                                       {"suite_file", m.suite_file}, {"counts", counts},
                                       {"points", pts}, {"notes", notes}}.dump(1).c_str());
    return 0;
  }
  std::printf("%s (%s): %zu points\n", m.suite.c_str(), m.suite_file.c_str(), m.points.size());
  for (const auto& r : rows)
    std::printf("%4lld  %-10s %-11s %s%s%s\n", static_cast<long long>(r.index), r.id.c_str(),
                r.state.c_str(), r.name.c_str(), r.detail.empty() ? "" : "  -- ", r.detail.c_str());
  std::string total;
  for (const auto& [k, n] : counts) total += fmt::format("{}{} {}", total.empty() ? "" : ", ", n, k);
  std::printf("%s\n", total.c_str());
  for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
  return 0;
}

const bool registered = [] {
  register_command({"status", "per point: done, failed (why), incomplete, running, pending",
                    [](CLI::App& sub) {
                      auto dir = std::make_shared<std::string>();
                      auto json = std::make_shared<bool>(false);
                      sub.add_option("results", *dir, "results folder")->required();
                      sub.add_flag("--json", *json, "print the status as JSON");
                      sub.callback([dir, json] {
                        const int code = status(*dir, *json);
                        if (code != 0) throw Exit{code};
                      });
                    }});
  return true;
}();
}  // namespace
}  // namespace sb::cli
