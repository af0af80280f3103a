// Out-of-memory messages (out_of_memory.h).
#include "harness/launch/out_of_memory.h"

#include <new>

#include <fmt/format.h>

#include "harness/core/format.h"
#include "harness/workload.h"

namespace sb {
namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The plan's figure (`shardbench plan`, state/rank) for the point, or why there is none.
std::string estimate(const Point& p) {
  const TaskInfo* task = p.has("task") ? find_task(p.get_string("task")) : nullptr;
  if (!task || !task->model_state_bytes_per_rank) return "the plan has no estimate for this task";
  try {
    return fmt::format("the plan estimates {} of model state per rank (`shardbench plan`'s "
                       "state/rank: weights, gradients and optimizer state; activations and "
                       "buffers come on top)",
                       format_bytes(task->model_state_bytes_per_rank(p)));
  } catch (const std::exception&) {
    return "the plan could not estimate this point";
  }
}

// " Keys that lower it: batch = 64 (lower it: ...); microbatches = 1 (raise it: ...)." or "".
std::string keys_to_change(const Point& p) {
  const TaskInfo* task = p.has("task") ? find_task(p.get_string("task")) : nullptr;
  std::string out;
  if (task)
    for (const auto& [key, how] : task->memory_keys)
      if (p.has(key))
        out += fmt::format("{}{} = {} ({})", out.empty() ? "" : "; ", key,
                           value_to_string(p.get(key)), how);
  return out.empty() ? "" : " Keys that lower it: " + out + ".";
}

}  // namespace

std::optional<MemoryKind> out_of_memory_kind(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e)) return MemoryKind::Host;
  const std::string w = e.what();
  // LibTorch's allocators (c10::OutOfMemoryError, c10::Error): their first words.
  if (contains(w, "CUDA out of memory") || contains(w, "CUDA error: out of memory"))
    return MemoryKind::Device;
  if (contains(w, "DefaultCPUAllocator: not enough memory") ||
      contains(w, "DefaultCPUAllocator: can't allocate memory"))
    return MemoryKind::Host;
  return std::nullopt;
}

std::string out_of_memory_message(const Point& p, MemoryKind kind, const std::string& who,
                                  const std::string& when, const std::string& detail,
                                  const MemoryLimits& limits) {
  const bool host = kind == MemoryKind::Host;
  const std::string limit = host ? "the limits here: " + limits.describe()
                                 : "the limit is the GPU's own memory (the allocator's words "
                                   "above say how much it has and holds)";
  return fmt::format("out of {} memory in point {} ({}){}{}: {}. For this point {}; {}.{}",
                     host ? "host" : "GPU", p.index, p.name, who.empty() ? "" : ", on " + who,
                     when.empty() ? "" : ", " + when, detail, estimate(p), limit,
                     keys_to_change(p));
}

OomKillWatch::OomKillWatch() : dir_(memory_cgroup_dir()), before_(cgroup_oom_kills(dir_)) {}

std::string OomKillWatch::killed() const {
  if (before_ < 0) return "";
  const std::int64_t after = cgroup_oom_kills(dir_);
  if (after <= before_) return "";
  return fmt::format("the kernel's OOM killer ended {} process{} in the memory cgroup {} while the "
                     "point ran (oom_kill {} -> {})", after - before_,
                     after - before_ == 1 ? "" : "es", dir_, before_, after);
}

}  // namespace sb
