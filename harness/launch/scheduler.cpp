// Scheduler registry: the known schedulers by name (each registers itself in its own file).
#include "harness/launch/scheduler.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/core/check.h"

namespace sb {
namespace {
std::map<std::string, SchedulerFactory>& registry() {
  static std::map<std::string, SchedulerFactory> r;
  return r;
}
}  // namespace

void register_scheduler(const std::string& name, SchedulerFactory make) {
  SB_CHECK(registry().emplace(name, std::move(make)).second,
           "scheduler '{}' registered twice", name);
}

std::vector<std::string> scheduler_names() {
  std::vector<std::string> n;
  for (const auto& [name, make] : registry()) n.push_back(name);
  return n;
}

std::unique_ptr<Scheduler> find_scheduler(const std::string& name) {
  const auto it = registry().find(name);
  if (it == registry().end())
    SB_FAIL("unknown scheduler '{}'; known schedulers: {}", name,
            fmt::join(scheduler_names(), ", "));
  return it->second();
}

}  // namespace sb
