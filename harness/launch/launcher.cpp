// Launcher registry: the known launchers by name.
#include "harness/launch/launcher.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "harness/core/check.h"
#include "harness/spec/point.h"

namespace sb {

// An explicit table (not static registration): the harness is a static library and a
// self-registering object file that nothing references would be dropped by the linker.
static const std::vector<std::pair<std::string, std::unique_ptr<Launcher> (*)()>>& table() {
  static const std::vector<std::pair<std::string, std::unique_ptr<Launcher> (*)()>> t = {
      {"mpirun", make_mpirun_launcher}, {"srun", make_srun_launcher}};
  return t;
}

LaunchSpec launch_spec_for(const Point& p) {
  LaunchSpec s;
  s.world = p.has("world") ? static_cast<int>(p.get_int("world")) : 1;
  s.threads = p.has("threads") ? static_cast<int>(p.get_int("threads")) : 0;
  if (s.threads <= 0)
    s.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / s.world);
  s.as_root = geteuid() == 0;
  return s;
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
