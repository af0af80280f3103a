// A run point's result: provenance (ResultMeta, the file's root attributes, described by its
// Table) + the gathered records (Recorder), and the sinks that consume them: the HDF5 file of
// docs/HDF5_SCHEMA.md and a console summary.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "harness/trace/fields.h"
#include "harness/trace/recorder.h"

namespace sb {

class Point;
struct Suite;

inline constexpr std::int64_t kSchemaVersion = 1;

// Root attributes of a result file. Its Table, right below, is their one description (name,
// type from the member, unit, meaning): the HDF5 writer and reader (hdf5_sink.cpp), `shardbench
// schema` and through it docs/HDF5_SCHEMA.md's table and analysis/root_attributes.py (read by
// analysis/load.py and the h5py fixture writer), and tests/analysis/fixture_writer.cpp.
struct ResultMeta {
  std::int64_t schema_version = kSchemaVersion;
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

// Whether every file of this schema_version has the attribute, or files written before it
// was added lack it (a reader then takes ResultMeta's default, e.g. machine's "{}").
enum class Presence { always, added_later };

// A root attribute: a Field of ResultMeta (fields.h) and its presence.
template <class M>
struct RootAttribute : Field<ResultMeta, M> {
  Presence presence = Presence::always;
};

template <class M>
constexpr RootAttribute<M> root_attribute(const char* name, M ResultMeta::*member,
                                          const char* unit, const char* doc,
                                          Presence presence = Presence::always) {
  return {{name, member, unit, doc}, presence};
}

template <>
struct Table<ResultMeta> {
  using R = ResultMeta;
  // In file order (the order h5py lists them in, and the doc's table).
  static constexpr auto fields = std::make_tuple(
      root_attribute("schema_version", &R::schema_version, "",
                     "version of this layout (docs/HDF5_SCHEMA.md); a reader refuses another"),
      root_attribute("status", &R::status, "",
                     "`done`; `failed` (an error on a rank, a non-finite loss, a crash of the "
                     "launcher, the point's time limit: the watchdog stops it and the partial "
                     "trace is kept; or Slurm's pre-timeout signal on a point that does not "
                     "resume, which a requeue would restart at step 0: the partial trace is kept "
                     "and the reason says how to fix it); `incomplete` (stopped by "
                     "SIGTERM/SIGUSR1, e.g. `scancel`, Slurm's pre-timeout signal on a point that "
                     "resumes (the task is requeued), or an interrupted sweep; partial trace; "
                     "rerun by sweep/submit)"),
      root_attribute("failure_reason", &R::failure_reason, "",
                     "empty when done; else what failed: `[rank R on HOST] file:line: message`, "
                     "`time limit of S s reached after N steps, T s`, `stopped by signal N (name) "
                     "after N steps, T s`, or `launcher L ended with exit code N / signal S ...` "
                     "followed by the last lines of the point's log"),
      root_attribute("suite", &R::suite, "", "the suite's name"),
      root_attribute("suite_file", &R::suite_file, "", "path of the suite file, as given"),
      root_attribute("suite_sha256", &R::suite_sha256, "", "SHA-256 of the suite file's bytes"),
      root_attribute("point_index", &R::point_index, "", "position in expansion order"),
      root_attribute("point_id", &R::point_id, "", "stable id (hash of the canonical config)"),
      root_attribute("point_name", &R::point_name, "", "readable name"),
      root_attribute("baseline_id", &R::baseline_id, "", "the baseline point's id (\"\" if none)"),
      root_attribute("config", &R::config, "", "canonical JSON of the point's values"),
      root_attribute("reference", &R::reference, "",
                     "JSON object of reference figures from the suite (the paper's; tolerance "
                     "checks as NAME, NAME.lower, NAME.upper)"),
      root_attribute("git_commit", &R::git_commit, "",
                     "the commit the binary was built from (\"unknown\")"),
      root_attribute("shardbench_version", &R::shardbench_version, "", "shardbench's version"),
      root_attribute("versions", &R::versions, "",
                     "JSON object: `mpi` (first line of MPI_Get_library_version), `hdf5`, `fmt`, "
                     "`torch` (the workload's `torch_version` text; \"\" when none), `compiler` "
                     "(\"gcc 12.2.0\")"),
      root_attribute("hosts", &R::hosts, "", "JSON list of hostnames, index = rank"),
      root_attribute("machine", &R::machine, "",
                     "JSON: `nodes` (per host: `host`, `cpu_model`, `isa` flags, `cores`, "
                     "`rank_cpus`, `ranks`, `loadavg_1m_start`, `loadavg_1m_end`, `other_cpus`, "
                     "`steal_cpus`) and `ranks_per_node`; docs/METRICS.md \"Measurement "
                     "conditions\"", Presence::added_later),
      root_attribute("world_size", &R::world_size, "", "ranks that ran"),
      root_attribute("threads_per_rank", &R::threads_per_rank, "",
                     "the point's `threads`, 0 resolved to cores / ranks"),
      root_attribute("slurm_job_id", &R::slurm_job_id, "", "SLURM_JOB_ID; empty outside Slurm"),
      root_attribute("slurm_array_job_id", &R::slurm_array_job_id, "",
                     "SLURM_ARRAY_JOB_ID; empty outside a job array"),
      root_attribute("slurm_array_task_id", &R::slurm_array_task_id, "",
                     "SLURM_ARRAY_TASK_ID; empty outside a job array"),
      root_attribute("command_line", &R::command_line, "",
                     "command line of the rank that wrote the file (rank 0, or a failing rank)"),
      root_attribute("start_time", &R::start_time, "", "start of the run, ISO 8601 UTC"),
      root_attribute("end_time", &R::end_time, "", "end of the run, ISO 8601 UTC"),
      root_attribute("elapsed_s", &R::elapsed_s, "s", "wall time of the run"));
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

// Every root attribute of a result file, through Table<ResultMeta>. Throws sb::Error when the
// file cannot be opened or lacks an attribute every file has; one added later keeps its default.
ResultMeta read_result_meta(const std::string& path);

// The record tables of a result file (steps, ranks, comm, queries), read back through the
// same Tables that wrote them, and its scalars, series and texts; throws sb::Error naming a
// missing group or column.
Recorder read_result_records(const std::string& path);

// Console sink: a few lines per point (status, median step time, tokens/s, MFU, memory).
void print_summary(std::FILE* out, const ResultMeta& meta, const Recorder& rec);

}  // namespace sb
