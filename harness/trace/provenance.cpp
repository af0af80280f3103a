// Provenance of a result: identity, config, git commit, library versions, Slurm ids, times,
// and where result files and per-point logs live.
#include <hdf5.h>

#include <chrono>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/core/mpi_context.h"
#include "harness/spec/suite.h"
#include "harness/trace/result.h"

#ifndef SHARDBENCH_GIT_COMMIT
#define SHARDBENCH_GIT_COMMIT "unknown"
#endif
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
  m.git_commit = SHARDBENCH_GIT_COMMIT;
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

std::string point_log_path(const std::string& dir, std::int64_t index, const std::string& id) {
  return fmt::format("{}/logs/{}-{}.log", dir, index, id);
}

}  // namespace sb
