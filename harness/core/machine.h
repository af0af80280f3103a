// What a result needs to say about the machine it ran on: the CPU model and the ISA
// extensions that decide which kernels are fast (AMX, AVX-512 bf16/VNNI...), the cores this
// process may use, and the 1-minute load average (other work on the machine skews timings).
// One place reads them; results carry them as the `machine` root attribute (JSON).
#pragma once
#include <string>
#include <vector>

namespace sb {

struct MachineInfo {
  std::string host;
  std::string cpu_model;          // /proc/cpuinfo "model name" ("" when unknown)
  std::string vendor;             // /proc/cpuinfo "vendor_id" (GenuineIntel, AuthenticAMD; "")
  int cpu_family = -1;            // /proc/cpuinfo "cpu family" (x86; -1 when unknown)
  std::vector<std::string> isa;   // the flags of kIsaFlags this CPU has, in that order
  int cores = 1;                  // online CPUs of the node
  int physical_cores = 1;         // distinct (package, core) of the online CPUs (SMT siblings once)
  // The highest clock a core reaches, GHz, and where it was read: cpufreq's cpuinfo_max_freq,
  // else the nominal clock in the model name ("... @ 2.40GHz"); 0 and "" when neither says
  // (virtual machines without cpufreq and with a bare model name).
  double max_clock_ghz = 0;
  std::string clock_source;
  int rank_cpus = 1;              // CPUs this process may run on (its binding, cgroups)
  double loadavg_1m = -1;         // getloadavg; -1 when unavailable
};

// CPU time, in seconds, for telling our work from other work during a point: the node's busy
// time (/proc/stat: user, nice, system, irq, softirq; all CPUs), the time the hypervisor stole
// from it, and this process's own user + system time (every thread, getrusage).
struct CpuSample {
  double wall_s = 0;    // CLOCK_MONOTONIC
  double node_busy_s = -1, node_steal_s = -1;  // -1 when /proc/stat is unreadable
  double own_cpu_s = 0;
};
CpuSample cpu_sample();

// The ISA flags worth recording (lscpu / /proc/cpuinfo names).
extern const std::vector<std::string> kIsaFlags;

MachineInfo machine_now(const std::string& host);
// The nominal clock an x86 model name states ("Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz": 2.4),
// GHz; 0 when it states none.
double model_name_clock_ghz(const std::string& cpu_model);
int usable_cores();          // sched_getaffinity count; hardware_concurrency when that fails
double load_average_1m();    // -1 when unavailable

// Ranks x threads against the cores of one node: "" when they fit, else the sentence that
// says by how much (timings of an oversubscribed run measure the scheduler, not the code).
std::string oversubscription(int ranks_on_node, int threads_per_rank, int cores);

}  // namespace sb
