// A run point's result: provenance (ResultMeta) + the gathered records (Recorder), and the
// sinks that consume them: the HDF5 file of docs/HDF5_SCHEMA.md and a console summary.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "harness/trace/recorder.h"

namespace sb {

class Point;
struct Suite;

inline constexpr std::int64_t kSchemaVersion = 1;

// Root attributes of a result file (docs/HDF5_SCHEMA.md, "Root attributes").
struct ResultMeta {
  std::string status = "done";  // done | failed | incomplete
  std::string failure_reason;
  std::string suite, suite_file, suite_sha256;
  std::int64_t point_index = -1;
  std::string point_id, point_name, baseline_id;
  std::string config = "{}";     // canonical JSON of the point's values
  std::string reference = "{}";  // JSON object
  std::string git_commit, shardbench_version;
  std::string versions = "{}";   // JSON: mpi, hdf5, fmt, torch, compiler
  std::string hosts = "[]";      // JSON list, index = rank
  // JSON: per node its CPU model, ISA flags, cores, ranks and 1-minute load average at the
  // start and end (machine_json); "{}" in files from before it was recorded.
  std::string machine = "{}";
  std::int64_t world_size = 0, threads_per_rank = 0;
  std::string slurm_job_id, slurm_array_job_id, slurm_array_task_id;
  std::string command_line;
  std::string start_time, end_time;  // ISO 8601 UTC
  double elapsed_s = 0;
};

// Provenance for `point` of `suite`: identity, config, git commit, library versions, Slurm
// ids from the environment, start_time = now. hosts/world/threads/command line are the
// caller's (they need MPI or argv).
ResultMeta make_result_meta(const Suite& suite, const Point& point);
// JSON of library versions and build/runtime choices: mpi, hdf5, fmt, compiler, plus the
// workload's texts torch_version (as "torch") and cpu_allocator; "" when not recorded.
std::string versions_json(const std::map<std::string, std::string>& texts = {});
std::string json_string_list(const std::vector<std::string>& items);
// This rank's machine facts at the start (machine_now + cpu_sample) and its figures at the
// end (load average, cpu_sample) as JSON; rank 0 merges every rank's into the `machine`
// attribute: {"nodes": [{host, cpu_model, isa, cores, rank_cpus, ranks, loadavg_1m_start,
// loadavg_1m_end, other_cpus, steal_cpus}], "ranks_per_node": max over nodes}.
// other_cpus: CPUs' worth of work on the node that was not this point's ranks, averaged over
// the point: (node busy time - the ranks' own CPU time) / wall time; steal_cpus: the time the
// hypervisor gave to other guests / wall time (docs/METRICS.md, "Measurement conditions").
// end_json empty (a failure before the end): no end figures (-1).
std::string machine_rank_json(const std::string& host);
std::string machine_end_json();
std::string machine_json(const std::vector<std::string>& start_json,
                         const std::vector<std::string>& end_json);
std::string build_git_commit();  // the commit this binary was built from ("unknown")
std::string iso_time_now();  // "2026-12-02T10:00:00Z"

// RESULTS/points/<index>-<id>.h5 and RESULTS/logs/<index>-<id>.log
std::string result_path(const std::string& results_dir, std::int64_t index, const std::string& id);
std::string point_log_path(const std::string& results_dir, std::int64_t index, const std::string& id);
// RESULTS/logs/<index>-<id>.progress.json: a running point's step, total and ETA (rank 0).
std::string point_progress_path(const std::string& results_dir, std::int64_t index,
                                const std::string& id);
// RESULTS/logs/<index>-<id>/rank<r>.log: what rank r printed (the point log interleaves all).
std::string rank_log_path(const std::string& results_dir, std::int64_t index, const std::string& id,
                          int rank);

// Writes the whole file to `path`.tmp.<pid> and renames it to `path` (atomic on POSIX), so a
// file under its final name is always complete. Creates the parent folder. Throws sb::Error.
void write_result_hdf5(const std::string& path, const ResultMeta& meta, const Recorder& rec);

// What `status` and the schedulers need from an existing result file.
struct ResultSummary {
  bool exists = false;     // a readable file under the final name
  std::string status;      // done | failed | incomplete | "unreadable: <why>"
  std::string failure_reason, point_id, point_name, end_time;
  std::int64_t steps = 0;  // rows in /steps
  double elapsed_s = 0;    // the run's wall time (0 when unreadable)
};
ResultSummary read_result_summary(const std::string& path);

// The record tables of a result file (steps, ranks, comm, queries), read back through the
// same Tables that wrote them; throws sb::Error naming a missing group or column.
Recorder read_result_records(const std::string& path);

// Console sink: a few lines per point (status, median step time, tokens/s, MFU, memory).
void print_summary(std::FILE* out, const ResultMeta& meta, const Recorder& rec);

}  // namespace sb
