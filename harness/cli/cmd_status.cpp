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

#include "harness/cli/command.h"
#include "harness/core/check.h"
#include "harness/launch/results.h"
#include "harness/launch/slurm_queue.h"
#include "harness/trace/result.h"

namespace sb::cli {
namespace {

// Point index run by a live local sweep (RESULTS/running.json), -1 when none.
std::int64_t locally_running(const std::string& dir) {
  std::ifstream in(dir + "/running.json");
  if (!in) return -1;
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    const auto j = nlohmann::json::parse(ss.str());
    const int pid = j.at("pid").get<int>();
    if (kill(pid, 0) != 0) return -1;  // the sweep is gone: its marker is stale
    return j.at("index").get<std::int64_t>();
  } catch (const nlohmann::json::exception&) {
    return -1;
  }
}

int status(const std::string& dir) {
  const Manifest m = read_manifest(dir);
  std::string queue_error;
  const auto queued = queued_points(dir, &queue_error);
  const std::int64_t running = locally_running(dir);
  std::map<std::string, int> counts;
  std::printf("%s (%s): %zu points\n", m.suite.c_str(), m.suite_file.c_str(), m.points.size());
  for (const auto& p : m.points) {
    const ResultSummary s = read_result_summary(result_path(dir, p.index, p.id));
    std::string state, detail;
    if (s.exists && s.status != "incomplete") {
      state = s.status.rfind("unreadable", 0) == 0 ? "unreadable" : s.status;
      detail = s.status == "done" ? fmt::format("{} steps", s.steps) : s.failure_reason;
      if (state == "unreadable") detail = s.status;
    } else if (const auto q = queued.find(p.index); q != queued.end()) {
      state = q->second == "RUNNING" || q->second == "COMPLETING" ? "running" : "pending";
      detail = "slurm " + q->second;
    } else if (p.index == running) {
      state = "running";
      detail = "local sweep";
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
  if (!queue_error.empty()) std::printf("note: %s\n", queue_error.c_str());
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
