// Memory limits and the cgroup's OOM-kill count (memory_limits.h).
#include "harness/core/memory_limits.h"

#include <sys/resource.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "harness/core/format.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value of the line "NAME VALUE" in a key-value file (memory.events, /proc/meminfo's
// "MemTotal:"), or -1.
std::int64_t field(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string key;
  std::int64_t v = 0;
  while (in >> key) {
    if (key == name && in >> v) return v;
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

std::uint64_t machine_bytes() {
  const std::int64_t kib = field(read_text("/proc/meminfo"), "MemTotal:");
  return kib > 0 ? static_cast<std::uint64_t>(kib) * 1024 : 0;
}

std::uint64_t address_space_bytes() {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<std::uint64_t>(r.rlim_cur);
}

}  // namespace

std::string memory_cgroup_dir(const std::string& proc_self_cgroup, const std::string& root) {
  std::istringstream in(proc_self_cgroup);
  std::string line, unified;
  while (std::getline(in, line)) {
    // "ID:CONTROLLERS:PATH"; v1 lists its controllers ("4:memory:/a"), v2 none ("0::/a").
    const auto a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    const std::string path = line.substr(b + 1);
    if (controllers.find(",memory,") != std::string::npos) {
      const std::string dir = root + "/memory" + path;
      if (fs::is_directory(dir)) return dir;
    } else if (controllers == ",,") {
      unified = path;
    }
  }
  if (unified.empty()) return "";
  for (const std::string& dir : {root + unified, root + "/unified" + unified})
    if (fs::exists(dir + "/memory.events")) return dir;
  return "";
}

std::string memory_cgroup_dir() {
  if (const char* e = std::getenv("SB_MEMORY_CGROUP"); e && *e) return e;
  return memory_cgroup_dir(read_text("/proc/self/cgroup"), "/sys/fs/cgroup");
}

std::int64_t cgroup_oom_kills(const std::string& dir) {
  if (dir.empty()) return -1;
  for (const char* f : {"/memory.events", "/memory.oom_control"}) {
    const std::int64_t n = field(read_text(dir + f), "oom_kill");
    if (n >= 0) return n;
  }
  return -1;
}

std::uint64_t cgroup_memory_limit(const std::string& dir) {
  if (dir.empty()) return 0;
  for (const char* f : {"/memory.max", "/memory.limit_in_bytes"}) {
    std::istringstream in(read_text(dir + f));
    std::uint64_t v = 0;
    if (!(in >> v)) continue;  // "max" (v2's none) or unreadable
    // v1's "none" is 2^63 rounded down to a page: anything that large limits nothing.
    return v >= (std::uint64_t{1} << 62) ? 0 : v;
  }
  return 0;
}

MemoryLimits memory_limits() {
  MemoryLimits m;
  m.address_space = address_space_bytes();
  m.cgroup_dir = memory_cgroup_dir();
  m.cgroup = cgroup_memory_limit(m.cgroup_dir);
  m.machine = machine_bytes();
  return m;
}

std::string MemoryLimits::describe() const {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (address_space) add(fmt::format("ulimit -v {}", format_bytes(double(address_space))));
  if (cgroup) add(fmt::format("memory cgroup {} ({})", format_bytes(double(cgroup)), cgroup_dir));
  if (machine) add(fmt::format("machine {}", format_bytes(double(machine))));
  return out.empty() ? "none known" : out;
}

}  // namespace sb
