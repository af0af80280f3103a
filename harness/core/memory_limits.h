// The memory a rank may use, from each thing that limits it (the address-space rlimit that
// `ulimit -v` sets, the memory cgroup Slurm puts a job in, the machine's RAM), and the count
// of the kernel's OOM kills in that cgroup: what an out-of-memory message sets beside the
// plan's estimate (harness/launch/out_of_memory.h).
#pragma once
#include <cstdint>
#include <string>

namespace sb {

struct MemoryLimits {
  std::uint64_t address_space = 0;  // RLIMIT_AS (ulimit -v), bytes; 0 = unlimited
  std::uint64_t cgroup = 0;         // the memory cgroup's limit, bytes; 0 = none
  std::string cgroup_dir;           // the cgroup folder it was read from ("" = none found)
  std::uint64_t machine = 0;        // MemTotal, bytes; 0 = unknown
  // "ulimit -v 4.00 GiB, memory cgroup 8.00 GiB (/sys/fs/cgroup/...), machine 62.79 GiB":
  // the limits that are set, "none known" when none is.
  std::string describe() const;
};
MemoryLimits memory_limits();

// This process's memory cgroup folder: $SB_MEMORY_CGROUP when set (a test's stand-in, or a
// folder a job script knows better), else found from /proc/self/cgroup under /sys/fs/cgroup.
// "" when there is none.
std::string memory_cgroup_dir();
// The same from a /proc/self/cgroup text and a mount root: cgroup v1's memory controller
// (ROOT/memory/PATH) where the text names one, else v2's unified hierarchy (ROOT/PATH, or
// ROOT/unified/PATH in the hybrid layout) where that folder has memory.events. Pure but for
// the existence checks, so tests give it a folder of their own.
std::string memory_cgroup_dir(const std::string& proc_self_cgroup, const std::string& root);

// The kernel's OOM kills in the cgroup folder so far: the "oom_kill N" line of memory.events
// (v2) or memory.oom_control (v1); -1 when neither is readable or has the line.
std::int64_t cgroup_oom_kills(const std::string& dir);
// The cgroup's memory limit in bytes (v2 memory.max, v1 memory.limit_in_bytes); 0 when it has
// none ("max", or v1's page-rounded 2^63) or the file is unreadable.
std::uint64_t cgroup_memory_limit(const std::string& dir);

}  // namespace sb
