// BaseConfig from a point (base_config.h).
#include "harness/spec/base_config.h"

#include "harness/spec/point.h"

namespace sb {

BaseConfig base_config(const Point& p) {
  BaseConfig b;
  b.task = p.get_string("task");
  b.launcher = p.get_string("launcher");
  // Ranges are checked when the suite is read (harness/workload.cpp): the casts are safe.
  b.world = static_cast<int>(p.get_int("world"));
  b.threads = static_cast<int>(p.get_int("threads"));
  b.steps = p.get_int("steps");
  b.warmup = p.get_int("warmup");
  b.seed = p.get_int("seed");
  b.time_limit_s = p.get_double("time_limit");
  return b;
}

}  // namespace sb
