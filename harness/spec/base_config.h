// The base keys every point has (registered, with their defaults and ranges, in
// harness/workload.cpp; expansion fills the defaults in), read once and typed: the one place
// the harness reads them, so no caller keeps a fallback of its own that could disagree.
#pragma once
#include <cstdint>
#include <string>

namespace sb {

class Point;

struct BaseConfig {
  std::string task, launcher;
  int world = 1;
  int threads = 0;  // per rank; 0 = the node's cores shared by the ranks on it
  std::int64_t steps = 0, warmup = 0, seed = 0;
  double time_limit_s = 0;  // seconds; 0 = none
};

// Throws sb::Error naming the key when the point lacks one (a point not made by expansion).
BaseConfig base_config(const Point& p);

}  // namespace sb
