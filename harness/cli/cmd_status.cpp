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
#include "harness/launch/results.h"
#include "harness/launch/scheduler.h"
#include "harness/trace/result.h"

namespace sb::cli {
namespace {

int status(const std::string& dir) {
  const Manifest m = read_manifest(dir);
  // What each scheduler has under way (a local sweep's point, Slurm's queued tasks).
  std::map<std::int64_t, std::pair<std::string, std::string>> active;  // index -> (sched, state)
  std::vector<std::string> notes;
  for (const auto& name : scheduler_names()) {
    std::string note;
    for (const auto& [index, state] : find_scheduler(name)->active_points(dir, &note))
      active.emplace(index, std::make_pair(name, state));
    if (!note.empty()) notes.push_back(note);
  }
  std::map<std::string, int> counts;
  std::printf("%s (%s): %zu points\n", m.suite.c_str(), m.suite_file.c_str(), m.points.size());
  for (const auto& p : m.points) {
    const ResultSummary s = read_result_summary(result_path(dir, p.index, p.id));
    std::string state, detail;
    if (s.exists && s.status != "incomplete") {
      state = s.status.rfind("unreadable", 0) == 0 ? "unreadable" : s.status;
      detail = s.status == "done" ? fmt::format("{} steps", s.steps) : s.failure_reason;
      if (state == "unreadable") detail = s.status;
    } else if (const auto a = active.find(p.index); a != active.end()) {
      const auto& [sched, st] = a->second;
      state = st == "running" || st == "RUNNING" || st == "COMPLETING" ? "running" : "pending";
      detail = sched == "local" ? "local sweep" : sched + " " + st;
    } else if (s.exists) {
      state = "incomplete";
      detail = s.failure_reason;
    } else {
      state = "pending";
    }
    ++counts[state];
    // The first line of a reason; the rest (log lines) is in the file.
    detail = detail.substr(0, detail.find('\n'));
    std::printf("%4lld  %-10s %-11s %s%s%s\n", static_cast<long long>(p.index), p.id.c_str(),
                state.c_str(), p.name.c_str(), detail.empty() ? "" : "  -- ", detail.c_str());
  }
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
                      sub.add_option("results", *dir, "results folder")->required();
                      sub.callback([dir] {
                        const int code = status(*dir);
                        if (code != 0) throw Exit{code};
                      });
                    }});
  return true;
}();
}  // namespace
}  // namespace sb::cli
