// Machine facts for provenance (machine.h): read from /proc and libc, never guessed.
#include "harness/core/machine.h"

#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

namespace sb {

const std::vector<std::string> kIsaFlags = {
    "sse4_2",      "avx",          "avx2",        "fma",        "f16c",       "avx512f",
    "avx512bw",    "avx512vl",     "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni",
    "amx_tile",    "amx_bf16",     "amx_int8",    "amx_fp16",   "asimd",      "sve",        "bf16"};

namespace {
// The value of the first "<key>\t: value" line of /proc/cpuinfo.
std::string cpuinfo_field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }
  return "";
}
// Distinct (physical_package_id, core_id) over the online CPUs' sysfs topology; the CPU count
// when sysfs does not say.
int physical_cores(int cpus) {
  std::set<std::pair<std::string, std::string>> cores;
  for (int c = 0; c < cpus; ++c) {
    const std::string t = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", c);
    std::ifstream pkg(t + "physical_package_id"), core(t + "core_id");
    std::string p, k;
    if (!(pkg >> p) || !(core >> k)) return cpus;
    cores.insert({p, k});
  }
  return cores.empty() ? cpus : static_cast<int>(cores.size());
}

// cpufreq's highest clock (kHz), else the " @ 2.40GHz" of an Intel model name.
void read_clock(MachineInfo& m) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  double khz = 0;
  if (f >> khz && khz > 0) {
    m.max_clock_ghz = khz / 1e6;
    m.clock_source = "cpufreq cpuinfo_max_freq";
    return;
  }
  const double ghz = model_name_clock_ghz(m.cpu_model);
  if (ghz > 0) {
    m.max_clock_ghz = ghz;
    m.clock_source = "the model name's nominal clock";
  }
}
}  // namespace

double model_name_clock_ghz(const std::string& cpu_model) {
  const auto at = cpu_model.rfind('@');
  if (at == std::string::npos || cpu_model.find("GHz", at) == std::string::npos) return 0;
  return std::max(0.0, std::atof(cpu_model.c_str() + at + 1));
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

double load_average_1m() {
  double l[1];
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

MachineInfo machine_now(const std::string& host) {
  MachineInfo m;
  m.host = host;
  std::ifstream in("/proc/cpuinfo");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  m.cpu_model = cpuinfo_field(text, "model name");
  if (m.cpu_model.empty()) m.cpu_model = cpuinfo_field(text, "CPU part");  // arm
  m.vendor = cpuinfo_field(text, "vendor_id");
  const std::string family = cpuinfo_field(text, "cpu family");
  if (!family.empty()) m.cpu_family = std::atoi(family.c_str());
  std::string flags = cpuinfo_field(text, "flags");
  if (flags.empty()) flags = cpuinfo_field(text, "Features");  // arm
  std::set<std::string> have;
  std::istringstream fs(flags);
  for (std::string f; fs >> f;) have.insert(f);
  for (const auto& f : kIsaFlags)
    if (have.count(f)) m.isa.push_back(f);
  m.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  m.rank_cpus = usable_cores();
  m.physical_cores = physical_cores(m.cores);
  read_clock(m);
  m.loadavg_1m = load_average_1m();
  return m;
}

CpuSample cpu_sample() {
  CpuSample c;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  c.wall_s = double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  c.own_cpu_s = double(ru.ru_utime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec) +
                double(ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_stime.tv_usec);
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice" in clock ticks;
  // guest time is already inside user.
  std::ifstream in("/proc/stat");
  std::string cpu;
  double v[8] = {0};
  if (in >> cpu && cpu == "cpu" && in >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7]) {
    const double tick = double(sysconf(_SC_CLK_TCK));
    c.node_busy_s = (v[0] + v[1] + v[2] + v[5] + v[6]) / tick;
    c.node_steal_s = v[7] / tick;
  }
  return c;
}

std::string oversubscription(int ranks_on_node, int threads_per_rank, int cores) {
  const long want = static_cast<long>(ranks_on_node) * threads_per_rank;
  if (want <= cores) return "";
  return fmt::format("{} ranks x {} threads = {} threads on {} cores ({:.1f}x oversubscribed)",
                     ranks_on_node, threads_per_rank, want, cores, double(want) / cores);
}

}  // namespace sb
