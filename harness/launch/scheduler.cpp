// Scheduler registry: the known schedulers by name, each with its record (each registers
// itself in its own file), and the choice of one for `sweep` and `submit` by what it can do.
#include "harness/launch/scheduler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/core/check.h"
#include "harness/core/registry.h"

namespace sb {
namespace {
Registry<SchedulerInfo>& registry() {
  static Registry<SchedulerInfo> r("scheduler");
  return r;
}

const char* kind(bool cluster) {
  return cluster ? "hands points to a cluster's queue (`shardbench submit`)"
                 : "runs points on this machine (`shardbench sweep`)";
}

// The same message as before the registry (tests and users match it).
const SchedulerInfo& info_or_fail(const std::string& name) {
  if (const SchedulerInfo* i = registry().find(name)) return *i;
  SB_FAIL("unknown scheduler '{}'; known schedulers: {}", name, registry().known());
}
}  // namespace

void register_scheduler(const std::string& name, const std::string& doc, SchedulerInfo info) {
  SB_CHECK(info.make, "scheduler '{}' registered without a factory", name);
  registry().add(name, doc, std::move(info));
}

std::vector<std::string> scheduler_names() { return registry().names(); }

const SchedulerInfo& scheduler_info(const std::string& name) { return info_or_fail(name); }

std::unique_ptr<Scheduler> find_scheduler(const std::string& name) {
  return info_or_fail(name).make();
}

std::string choose_scheduler(const std::string& name, bool cluster) {
  std::vector<std::string> fit;
  registry().each([&](const std::string& n, const SchedulerInfo& i) {
    if (i.needs_cluster == cluster) fit.push_back(n);
  });
  if (!name.empty()) {
    if (info_or_fail(name).needs_cluster != cluster)
      SB_FAIL("scheduler '{}' {}; this command needs one that {}: {}", name, kind(!cluster),
              kind(cluster), fit.empty() ? std::string("(none registered)")
                                         : fmt::format("{}", fmt::join(fit, ", ")));
    return name;
  }
  if (fit.empty())
    SB_FAIL("no registered scheduler {}; known schedulers: {}", kind(cluster), registry().known());
  if (fit.size() > 1)
    SB_FAIL("more than one registered scheduler {}: {}; choose one with --scheduler",
            kind(cluster), fmt::join(fit, ", "));
  return fit.front();
}

}  // namespace sb
