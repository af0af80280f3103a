// A parsed suite before expansion (what the TOML said, values typed and located) and the
// pure function that expands it into validated run points. suite.cpp reads TOML into a
// SuiteSpec; expand() knows nothing about TOML, so it is tested with hand-built specs too.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "harness/spec/point.h"

namespace sb {

// Collects every problem as "file:line:column: key: message"; reported all at once.
class Diagnostics {
 public:
  explicit Diagnostics(std::string file) : file_(std::move(file)) {}
  void add(const SourcePos& pos, const std::string& key, const std::string& message);
  bool empty() const { return items_.empty(); }
  // Sorted by position (defaults, which have no line, last), duplicates removed.
  std::vector<std::string> lines() const;
  const std::string& file() const { return file_; }

 private:
  struct Item {
    int line, column;
    std::string text;
  };
  std::string file_;
  std::vector<Item> items_;
};

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
};

// Product of the dimensions (first slowest) over the base, minus excludes, with duplicates,
// baselines, references, range checks and the registered validators checked, then each
// point repeated `repetitions` times. Problems go to `diags`; the returned points are
// meaningful only when diags stays empty. Pure: same spec, same points, same ids.
std::vector<Point> expand(const SuiteSpec& spec, Diagnostics& diags);

// The readable form of one varied value in a point name: names as they are ("full_shard"),
// other values as key=value ("batch=8").
std::string name_part(const std::string& key, const Value& v);

}  // namespace sb
