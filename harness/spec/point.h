// A run point: one fully specified configuration, as data (key -> typed value).
// The harness knows keys, types and allowed names; it knows nothing of what they mean.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <typeindex>
#include <variant>
#include <vector>

namespace sb {

using Value = std::variant<bool, std::int64_t, double, std::string>;
struct PointCache;  // harness/spec/config.cpp

// Where a value came from, for error messages ("suite/foo.toml:12:5").
struct SourcePos {
  std::string file;
  int line = 0, column = 0;
  std::string str() const;  // "file:line:column", or "(default)" when line == 0
};

class Point {
 public:
  // Identity, filled in by expansion.
  std::string suite;   // suite name
  std::string file;    // the suite file, as given (key_at names it)
  int index = -1;      // position in expansion order
  std::string name;    // readable: "gpt2-tiny/full_shard/int8/w2"
  std::string id;      // stable short hash of canonical()
  std::string baseline_id;  // id of the point this one is compared with ("" if none)
  std::map<std::string, double> reference;  // reference figures attached by the suite

  void set(const std::string& key, Value v, SourcePos pos = {});
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  const Value& get(const std::string& key) const;  // throws sb::Error naming the key
  std::int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;  // ints widen
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  SourcePos where(const std::string& key) const;  // line 0 ("(default)") when not set by a file
  // Where a user error about `key` points, as `plan`'s diagnostics do: "suite.toml:12:5:
  // kv_cache_bytes", or "suite.toml: kv_cache_bytes (default)" when the file leaves it at its
  // default (SB_REQUIRE messages at run time start with it).
  std::string key_at(const std::string& key) const;
  const std::map<std::string, Value>& values() const { return values_; }

  // Canonical JSON of the values (sorted keys, no identity fields): hashed into id,
  // stored as provenance, and parsed back by from_canonical() on the ranks.
  std::string canonical() const;
  static Point from_canonical(const std::string& json);
  // "" when every rank's canonical() (canonicals[r]) is rank 0's; else the keys in which the
  // first rank that differs does, with both values ("strategy: \"full_shard\" on rank 0,
  // \"no_shard\" on rank 3").
  static std::string disagreement(const std::vector<std::string>& canonicals);

  // The cache of typed sections parsed from the values (harness/spec/config.h: config<S>).
  const void* section(std::type_index t) const;
  void keep_section(std::type_index t, std::shared_ptr<const void> s) const;

 private:
  std::map<std::string, Value> values_;
  std::map<std::string, SourcePos> pos_;
  // Typed sections parsed from the values (harness/spec/config.h): shared by copies until
  // either changes (set() starts a new one).
  mutable std::shared_ptr<PointCache> cache_;
};

std::string value_to_string(const Value& v);

}  // namespace sb
