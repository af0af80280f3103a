// Launcher registry: the known launchers by name.
#include "harness/launch/launcher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "harness/core/check.h"
#include "harness/core/machine.h"
#include "harness/spec/base_config.h"
#include "harness/spec/point.h"
#include "harness/spec/suite.h"
#include "harness/workload.h"

namespace sb {

// Every program links the harness whole-archive, so self-registering files are kept.
static std::vector<std::pair<std::string, LauncherFactory>>& table() {
  static std::vector<std::pair<std::string, LauncherFactory>> t;
  return t;
}

void register_launcher(const std::string& name, const std::string& doc, LauncherFactory make) {
  for (const auto& [n, f] : table()) SB_CHECK(n != name, "launcher '{}' registered twice", name);
  table().emplace_back(name, make);
  register_name("launcher", name, doc);
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

std::vector<std::string> launcher_names() {
  std::vector<std::string> n;
  for (const auto& [name, make] : table()) n.push_back(name);
  return n;
}

std::unique_ptr<Launcher> find_launcher(const std::string& name) {
  for (const auto& [n, make] : table())
    if (n == name) return make();
  SB_FAIL("unknown launcher '{}'; known launchers: {}", name, fmt::join(launcher_names(), ", "));
}

}  // namespace sb
