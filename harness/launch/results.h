// The results folder as the schedulers and `status` see it: where a point's files are,
// whether it still has to run, the manifest of a suite's points, and recording a failure
// for a point whose launcher died without writing its result.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/trace/result.h"

namespace sb {

struct Suite;
class Point;

// results/<suite name>
std::string default_results_dir(const Suite& suite);

// Whether a scheduler must (re)run the point: no file, incomplete, unreadable, or failed
// with retry_failed. `why` says which, for the log.
bool point_needs_run(const std::string& results_dir, const Point& p, bool retry_failed,
                     std::string* why);

// Writes a failed result file (no records) unless a readable one is already there.
// The reason is followed by the last lines of log_file when given. Returns whether it wrote.
bool record_point_failure(const std::string& results_dir, const Suite& suite, const Point& p,
                          const std::string& reason, const std::string& log_file);

// Turns the result at `path` into a failed one with `reason`; everything else (the partial
// trace) stays as it was. A copy is changed and renamed over the original: never a
// half-written file.
void mark_result_failed(const std::string& path, const std::string& reason);

// RESULTS/manifest.json: the suite's points (index, id, name, world), written by sweep and
// submit so that `status` knows which points are pending.
struct ManifestPoint {
  std::int64_t index = 0;
  std::string id, name;
  std::int64_t world = 1;
};
struct Manifest {
  std::string suite, suite_file, suite_sha256;
  std::vector<ManifestPoint> points;
};
void write_manifest(const std::string& results_dir, const Suite& suite);
Manifest read_manifest(const std::string& results_dir);  // throws when absent/corrupt

// Writes `text` to `path` through a temporary file and rename (same rule as result files).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace sb
