// Out of memory, said so that a user can act on it: what ran out (the host's memory or the
// GPU's), where (point, rank, phase and step), the plan's estimate for the point beside the
// limits in force, and the keys that lower it. Two ways in: a rank that catches the
// allocation failure (std::bad_alloc, LibTorch's CPU or CUDA allocator errors), and a rank the
// kernel's OOM killer ended under a cgroup limit (Slurm's usual), which the sweep notices by
// the cgroup's oom_kill count rising while the point ran.
#pragma once
#include <exception>
#include <optional>
#include <string>

#include "harness/core/memory_limits.h"
#include "harness/spec/point.h"

namespace sb {

enum class MemoryKind { Host, Device };

// Which memory the exception says ran out; nullopt when it is no out-of-memory error.
std::optional<MemoryKind> out_of_memory_kind(const std::exception& e);

// The one message both ways in record: "out of host memory in point 3 (NAME), in step 2:
// DETAIL. For this point the plan estimates ...; the limits here: ... Keys that lower it: ...".
// `who` names the rank where the message does not start with it ("" then), `when` the phase
// and step ("in step 3", "in evaluation after step 9", "after step 4"; "" unknown), `detail`
// what the allocator or the kernel said.
std::string out_of_memory_message(const Point& p, MemoryKind kind, const std::string& who,
                                  const std::string& when, const std::string& detail,
                                  const MemoryLimits& limits);

// The kernel's OOM kills in this process's memory cgroup (memory_cgroup_dir()) around one
// point: read before, then compared after.
class OomKillWatch {
 public:
  OomKillWatch();
  // "" when the count did not rise (or cannot be read); else "the kernel's OOM killer ended
  // N process(es) in the memory cgroup DIR while the point ran (oom_kill A -> B)".
  std::string killed() const;

 private:
  std::string dir_;
  std::int64_t before_ = -1;
};

}  // namespace sb
