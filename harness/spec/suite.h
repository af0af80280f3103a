// Suite files (suite/*.toml): parse, validate and expand into run points.
#pragma once
#include <string>
#include <vector>

#include "harness/core/check.h"
#include "harness/spec/base_config.h"
#include "harness/spec/point.h"

namespace sb {

struct Suite {
  std::string name;         // [suite] name, defaults to the file stem
  std::string file;         // path as given
  std::string sha256;       // of the file's bytes (provenance)
  std::string description;
  std::vector<Point> points;  // expanded, validated, in deterministic order
  // "file:line:column: key: warning: message", e.g. an input file that does not exist (yet):
  // `shardbench plan` and `sweep` print them; they do not stop the suite.
  std::vector<std::string> warnings;
  SlurmTable slurm;  // [slurm]: how `submit` asks a cluster for the points (empty = defaults)
};

// Parses, validates and expands. On any problem throws sb::Error whose message lists every
// diagnostic as "file:line:column: key: message" (all of them, not just the first).
Suite load_suite(const std::string& path);

// The same from TOML text; `path` names the file in diagnostics (and its stem the suite).
Suite load_suite_text(const std::string& toml_text, const std::string& path);

// What load_suite throws on invalid suites: what() is every diagnostic, one per line;
// `shardbench plan` prints them and exits 2.
class SuiteError : public Error {
 public:
  explicit SuiteError(std::vector<std::string> diagnostics);
  std::vector<std::string> diagnostics;  // "file:line:column: key: message"
};

// Finds a point by index ("3") or id ("a1b2c3d4"); throws listing the valid range.
const Point& find_point(const Suite& s, const std::string& index_or_id);

}  // namespace sb
