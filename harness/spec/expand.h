// A parsed suite before expansion (what the TOML said, values typed and located) and the
// pure function that expands it into validated run points. suite.cpp reads TOML into a
// SuiteSpec; expand() knows nothing about TOML, so it is tested with hand-built specs too.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/spec/point.h"
#include "harness/workload.h"

namespace sb {

struct KeySpec;  // harness/workload.h

// Collects every problem as "file:line:column: key: message"; reported all at once.
// Warnings ("file:line:column: key: warning: message") are kept apart: they do not stop a suite.
class Diagnostics {
 public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}
  void add(const SourcePos& pos, const std::string& key, const std::string& message);
  void warn(const SourcePos& pos, const std::string& key, const std::string& message);
  bool empty() const { return items_.empty(); }
  // Sorted by position (defaults, which have no line, last), duplicates removed.
  std::vector<std::string> lines() const;
  std::vector<std::string> warning_lines() const;
  const std::string& file() const { return file_; }

 private:
  struct Item {
    int line, column;
    std::string text;
  };
  std::string format(const SourcePos& pos, const std::string& key, const std::string& message) const;
  static std::vector<std::string> sorted(std::vector<Item> items);
  std::string file_;
  std::vector<Item> items_, warnings_;
};

// A string as it may appear inside one diagnostic line: control characters and bytes outside
// printable ASCII as escapes (\n, \t, \xNN), so a file name cannot break the one-line format.
std::string printable(const std::string& s);

// "" when `v` is an allowed value of the key (KeySpec's range; Float keys finite), else what is
// wrong and how to fix it, naming the key.
std::string range_problem(const KeySpec& ks, const Value& v);
// The range as `shardbench keys` shows it: "1 .. 1048576", "finite", "" (no range).
std::string range_text(const KeySpec& ks);

// The reference figures a report reads (analysis/paper.py; docs/REPORTS.md), name -> what it
// is. The one list: a [[reference]] figure not in it is refused (a typo would be ignored).
const std::vector<std::pair<std::string, std::string>>& reference_figures();

// The most points one suite may expand to (docs/SUITES.md): each is a run of seconds to hours,
// and a product of axes grows fast (a typo can mean 10^9 points). Checked by counting, before
// any point is built.
inline constexpr std::uint64_t kMaxSuitePoints = 10000;

struct Located {
  Value value;
  SourcePos pos;
};

// One varied dimension: an [axes] key (one key) or a [[zip]] group (several keys varying
// together). rows[i][k] is the i-th value of keys[k].
struct Dimension {
  std::vector<std::string> keys;
  std::vector<std::vector<Located>> rows;
  SourcePos pos;  // of the first key: dimensions vary in file order, the first slowest
};

// An [[exclude]] or [[reference]] entry: matches a point whose value of every key is one
// of the listed values.
struct Matcher {
  std::string what;  // "[[exclude]] #2", for messages
  SourcePos pos;
  std::vector<std::pair<std::string, std::vector<Value>>> match;
  std::map<std::string, double> figures;  // [[reference]] only
  bool matches(const Point& p) const;
};

struct SuiteSpec {
  std::string name, description, file, sha256;
  Point base;  // every registered key: defaults, overridden by [base]
  std::vector<Dimension> dims;
  std::vector<Matcher> excludes, references;
  std::vector<std::pair<std::string, Located>> baseline;  // key -> replacement value
  // [suite] repetition_order = "interleaved": every point's repetition 0, then every point's
  // repetition 1, ... (points in matrix order within each); default "grouped": a point's
  // repetitions one after another.
  bool interleave_repetitions = false;
};

// How many points expand() would build (repetitions included), counted without building them:
// the product of the dimensions minus the excluded combinations. `exact` is false when the
// excludes are too intricate to count cheaply; `points` is then the product before excludes.
struct PointCount {
  std::uint64_t points = 0;  // saturates at 2^62
  bool exact = true;
};
PointCount count_points(const SuiteSpec& spec);

// Product of the dimensions (first slowest) over the base, minus excludes, with duplicates,
// baselines, references, range checks and the registered validators checked, then each
// point repeated `repetitions` times. Refuses (without building anything) a suite of more than
// kMaxSuitePoints points. Problems go to `diags`; the returned points are meaningful only when
// diags stays empty. Same spec, same points, same ids (validators may look at the file system
// for warnings: an input file that does not exist yet).
std::vector<Point> expand(const SuiteSpec& spec, Diagnostics& diags);

// What plan says is wrong with one point on its own: ranges, keys its task ignores, the
// registered validators (a suite validator's cross-point rules are not run).
std::vector<Diagnostic> point_problems(const Point& p);

// The readable form of one varied value in a point name: names as they are ("full_shard"),
// other values as key=value ("batch=8").
std::string name_part(const std::string& key, const Value& v);

}  // namespace sb
