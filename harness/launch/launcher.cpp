// Launcher registry: the known launchers by name, each with its record; the launch spec of a
// point and the oversubscription check of the local scheduler.
#include "harness/launch/launcher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "harness/core/check.h"
#include "harness/core/machine.h"
#include "harness/core/registry.h"
#include "harness/spec/base_config.h"
#include "harness/spec/point.h"
#include "harness/spec/suite.h"
#include "harness/workload.h"

namespace sb {

namespace {
// Every program links the harness whole-archive, so self-registering files are kept. The names
// join the "launcher" name set (the `launcher` key's).
Registry<LauncherInfo>& registry() {
  static Registry<LauncherInfo> r("launcher", "launcher");
  return r;
}

// The message users and tests know (Registry::get says "known: ...").
const LauncherInfo& info_or_fail(const std::string& name) {
  if (const LauncherInfo* i = registry().find(name)) return *i;
  SB_FAIL("unknown launcher '{}'; known launchers: {}", name, registry().known());
}
}  // namespace

void register_launcher(const std::string& name, const std::string& doc, LauncherInfo info) {
  SB_CHECK(info.make, "launcher '{}' registered without a factory", name);
  registry().add(name, doc, std::move(info));
}

LaunchSpec launch_spec_for(const Point& p) {
  LaunchSpec s;
  const BaseConfig b = base_config(p);
  s.world = b.world;
  s.threads = b.threads;
  if (s.threads <= 0)
    s.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / s.world);
  s.as_root = geteuid() == 0;
  return s;
}

std::vector<std::string> oversubscribed_points(const Suite& suite, int cores, int np_max) {
  std::vector<std::string> out;
  for (const Point& p : suite.points) {
    const LaunchSpec s = launch_spec_for(p);
    if (np_max > 0 && s.world > np_max) continue;
    const std::string why = oversubscription(s.world, s.threads, cores);
    if (!why.empty()) out.push_back(fmt::format("point {} ({}): {}", p.index, p.name, why));
  }
  return out;
}

std::vector<std::string> launcher_names() { return registry().names(); }

const LauncherInfo& launcher_info(const std::string& name) { return info_or_fail(name); }

std::string allocation_problem(const std::string& launcher, bool scheduler_allocates) {
  const std::string& env = info_or_fail(launcher).allocation_env;
  if (env.empty() || scheduler_allocates || std::getenv(env.c_str()) != nullptr) return "";
  std::vector<std::string> free;  // the launchers that start ranks anywhere
  registry().each([&](const std::string& n, const LauncherInfo& i) {
    if (i.allocation_env.empty()) free.push_back(n);
  });
  return fmt::format("launcher '{}' starts ranks only inside an allocation ({} is not set): run "
                     "this inside one, hand the points to a cluster (`shardbench submit`), or "
                     "set `launcher` to one that needs none ({})",
                     launcher, env, free.empty() ? "none registered" : fmt::format("{}", fmt::join(free, ", ")));
}

std::unique_ptr<Launcher> find_launcher(const std::string& name) {
  return info_or_fail(name).make();
}

}  // namespace sb
