// Provenance of a result: identity, config, git commit, library versions, Slurm ids, times,
// and where result files and per-point logs live.
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/core/machine.h"
#include "harness/core/mpi_context.h"
#include "harness/spec/suite.h"
#include "harness/trace/result.h"

#include "sb_git_commit.h"  // generated on every build (cmake/GitCommit.cmake)
#ifndef SHARDBENCH_VERSION
#define SHARDBENCH_VERSION "unknown"
#endif

namespace sb {

std::string iso_time_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string versions_json(const std::map<std::string, std::string>& texts) {
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  nlohmann::json j;
  j["mpi"] = mpi_library_version();
  j["hdf5"] = fmt::format("{}.{}.{}", maj, min, rel);
  j["fmt"] = fmt::format("{}.{}.{}", FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
  // Recorded by the workloads (texts): text name -> key here.
  for (const auto& [text, key] : {std::pair<const char*, const char*>{"torch_version", "torch"},
                                  {"cpu_allocator", "cpu_allocator"}}) {
    const auto it = texts.find(text);
    j[key] = it == texts.end() ? "" : it->second;
  }
#if defined(__clang__)
  j["compiler"] = "clang " __VERSION__;
#else
  j["compiler"] = "gcc " __VERSION__;
#endif
  return j.dump();
}

std::string json_string_list(const std::vector<std::string>& items) {
  return nlohmann::json(items).dump();
}

namespace {
nlohmann::json sample_json(const CpuSample& c) {
  return {{"wall_s", c.wall_s}, {"node_busy_s", c.node_busy_s},
          {"node_steal_s", c.node_steal_s}, {"own_cpu_s", c.own_cpu_s}};
}

// Per host: the end figures of its first rank, every rank's own CPU time.
void add_end_figures(nlohmann::json& node, const std::vector<nlohmann::json>& starts,
                     const std::vector<nlohmann::json>& ends) {
  node["loadavg_1m_end"] = -1.0;
  node["other_cpus"] = -1.0;
  node["steal_cpus"] = -1.0;
  const auto& ranks = node["ranks"];
  const std::size_t first = ranks[0].get<std::size_t>();
  if (first >= ends.size() || ends[first].is_null()) return;
  const auto& a = starts[first]["cpu"];
  const auto& b = ends[first]["cpu"];
  node["loadavg_1m_end"] = ends[first].value("loadavg_1m_end", -1.0);
  const double wall = b.value("wall_s", 0.0) - a.value("wall_s", 0.0);
  if (wall <= 0 || a.value("node_busy_s", -1.0) < 0 || b.value("node_busy_s", -1.0) < 0) return;
  double own = 0;
  for (const auto& r : ranks) {
    const std::size_t i = r.get<std::size_t>();
    if (i < ends.size() && !ends[i].is_null())
      own += ends[i]["cpu"].value("own_cpu_s", 0.0) - starts[i]["cpu"].value("own_cpu_s", 0.0);
  }
  const double busy = b.value("node_busy_s", 0.0) - a.value("node_busy_s", 0.0);
  // Clock-tick rounding can put the difference a little below zero on an idle node, and a
  // virtualised /proc/stat has counted more busy time than the node's CPUs over a short point
  // (CI saw 4.1 on 2 cores): beyond the node's cores the figure only says "fully busy".
  const double cores = node.value("cores", 0.0);
  const double other = std::max(0.0, (busy - own) / wall);
  node["other_cpus"] = cores > 0 ? std::min(other, cores) : other;
  node["steal_cpus"] =
      std::max(0.0, (b.value("node_steal_s", 0.0) - a.value("node_steal_s", 0.0)) / wall);
}
}  // namespace

std::string machine_rank_json(const std::string& host) {
  const MachineInfo m = machine_now(host);
  return nlohmann::json{{"host", m.host},           {"cpu_model", m.cpu_model},
                        {"isa", m.isa},             {"cores", m.cores},
                        {"rank_cpus", m.rank_cpus}, {"loadavg_1m_start", m.loadavg_1m},
                        {"cpu", sample_json(cpu_sample())}}
      .dump();
}

std::string machine_end_json() {
  return nlohmann::json{{"loadavg_1m_end", load_average_1m()}, {"cpu", sample_json(cpu_sample())}}
      .dump();
}

// Ranks on one host share its figures: one entry per host, in first-rank order.
std::string machine_json(const std::vector<std::string>& start_json,
                         const std::vector<std::string>& end_json) {
  std::vector<nlohmann::json> starts, ends;
  for (const auto& t : start_json) starts.push_back(nlohmann::json::parse(t, nullptr, false));
  for (const auto& t : end_json) {
    auto j = nlohmann::json::parse(t, nullptr, false);
    ends.push_back(j.is_discarded() ? nlohmann::json() : j);
  }
  nlohmann::json nodes = nlohmann::json::array();
  std::map<std::string, std::size_t> at;
  std::size_t per_node = 0;
  for (std::size_t r = 0; r < starts.size(); ++r) {
    const auto& j = starts[r];
    if (j.is_discarded() || !j.contains("host")) continue;
    const std::string host = j["host"].get<std::string>();
    if (!at.count(host)) {
      at[host] = nodes.size();
      nlohmann::json node = j;
      node.erase("cpu");
      node["ranks"] = nlohmann::json::array();
      nodes.push_back(node);
    }
    auto& ranks = nodes[at[host]]["ranks"];
    ranks.push_back(r);
    per_node = std::max(per_node, ranks.size());
  }
  for (auto& node : nodes) add_end_figures(node, starts, ends);
  return nlohmann::json{{"nodes", nodes}, {"ranks_per_node", per_node}}.dump();
}

static std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

ResultMeta make_result_meta(const Suite& suite, const Point& point) {
  ResultMeta m;
  m.suite = suite.name;
  m.suite_file = suite.file;
  m.suite_sha256 = suite.sha256;
  m.point_index = point.index;
  m.point_id = point.id;
  m.point_name = point.name;
  m.baseline_id = point.baseline_id;
  m.config = point.canonical();
  m.reference = nlohmann::json(point.reference).dump();
  m.git_commit = build_git_commit();
  m.shardbench_version = SHARDBENCH_VERSION;
  m.versions = versions_json();
  if (point.has("world")) m.world_size = point.get_int("world");
  if (point.has("threads")) m.threads_per_rank = point.get_int("threads");
  m.slurm_job_id = env_or_empty("SLURM_JOB_ID");
  m.slurm_array_job_id = env_or_empty("SLURM_ARRAY_JOB_ID");
  m.slurm_array_task_id = env_or_empty("SLURM_ARRAY_TASK_ID");
  m.start_time = iso_time_now();
  return m;
}

std::string result_path(const std::string& dir, std::int64_t index, const std::string& id) {
  return fmt::format("{}/points/{}-{}.h5", dir, index, id);
}

std::string point_progress_path(const std::string& dir, std::int64_t index,
                                const std::string& id) {
  return fmt::format("{}/logs/{}-{}.progress.json", dir, index, id);
}

std::string rank_log_path(const std::string& dir, std::int64_t index, const std::string& id,
                          int rank) {
  return fmt::format("{}/logs/{}-{}/rank{}.log", dir, index, id, rank);
}

std::string point_log_path(const std::string& dir, std::int64_t index, const std::string& id) {
  return fmt::format("{}/logs/{}-{}.log", dir, index, id);
}

std::string build_git_commit() { return SHARDBENCH_GIT_COMMIT; }

}  // namespace sb
