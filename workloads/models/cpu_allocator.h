// A caching CPU allocator for LibTorch, installed at program start (static initializer in
// cpu_allocator.cpp; SB_CPU_ALLOCATOR=default keeps LibTorch's own).
//
// Why: on this class of machine (a VM) the first touch of fresh memory costs about 3.5 ms
// per MiB in page faults (measured: a 64 MiB fp32 copy into a new buffer 300 ms, into a
// reused one 5 ms). glibc returns blocks above its mmap threshold (at most 32 MiB) to the
// kernel on free, so every training step page-faulted its large activations, logits and
// gradients again. Blocks of at least 1 MiB are kept here by size class (64 KiB steps) and
// reused; new ones are mmapped (never glibc's heap), 2 MiB aligned and
// madvise(MADV_HUGEPAGE)d (one fault per 2 MiB).
// Smaller blocks are plain 64-byte aligned malloc/free (glibc reuses those well).
// Free blocks are cached up to a quarter of the memory the process may use (the smallest of
// RAM, the memory cgroup's limit and ulimit -v) divided by the ranks on its node;
// SB_CPU_CACHE_LIMIT (bytes, or 512M, 2G) sets the cap instead.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

namespace sb::models {

struct CpuCacheStats {
  std::uint64_t cached_bytes = 0;  // free blocks held for reuse
  std::uint64_t hits = 0, misses = 0;
  std::uint64_t evictions = 0;  // cached blocks returned to the OS to stay within the limit
  // Blocks of 1 MiB and more in use by tensors now, and the most since reset_cpu_peak()
  // (smaller ones are plain malloc and not counted): what a memory bound is tested against.
  std::uint64_t live_bytes = 0, peak_live_bytes = 0;
  bool installed = false;  // false when SB_CPU_ALLOCATOR=default or another took priority
  // Where the step was when peak_live_bytes was last raised (set_cpu_phase); reset_cpu_peak()
  // takes the phase current then ("" before any was set).
  const char* peak_what = "";
  int peak_index = -1;
};
CpuCacheStats cpu_cache_stats();
// For every result's provenance: "caching" when installed, else "libtorch default".
inline const char* cpu_allocator_name() {
  return cpu_cache_stats().installed ? "caching" : "libtorch default";
}
// Frees every cached block (e.g. between benchmark phases).
void release_cpu_cache();
// Starts a new peak_live_bytes window at the current live bytes.
void reset_cpu_peak();
// Names where the compute thread is (`what`: a string literal, e.g. "backward of unit";
// `index`: its unit, -1 none), so that a peak can say when it happened: the allocator copies
// the phase current when it raises peak_live_bytes (CpuCacheStats::peak_what/peak_index).
// Why: a peak's size alone cannot tell which moment of the step the memory model missed
// (FSDP's engine sets these at its hooks, engine.cpp). Cheap: two relaxed stores.
void set_cpu_phase(const char* what, int index = -1);
// "backward of unit 12", "optimizer", "" (no phase): the peak's phase as text.
std::string cpu_peak_phase(const CpuCacheStats& s);
// The most bytes live at once since construction above those live then (a step, a load):
// starts a new peak window (reset_cpu_peak), so two of them must not overlap.
class CpuPeakGrowth {
 public:
  CpuPeakGrowth() {
    reset_cpu_peak();
    base_ = cpu_cache_stats().live_bytes;
  }
  std::uint64_t bytes() const { return cpu_cache_stats().peak_live_bytes - base_; }
  // Above the larger of the bytes live at the start and now: what a step holds beyond the
  // state it starts from or leaves (its first run's new gradients are state, not the step's).
  std::uint64_t bytes_above_ends() const {
    const auto s = cpu_cache_stats();
    return s.peak_live_bytes - std::max(base_, s.live_bytes);
  }

 private:
  std::uint64_t base_ = 0;
};
// At most `bytes` of free blocks are cached (default: a quarter of physical memory); over it,
// the least recently freed go back to the OS first. Lowering it evicts at once.
void set_cpu_cache_limit(std::uint64_t bytes);

}  // namespace sb::models
