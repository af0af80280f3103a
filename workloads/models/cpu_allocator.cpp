// Caching CPU allocator (see cpu_allocator.h for why). Small blocks: posix_memalign / free
// (64-byte aligned, as LibTorch's default allocator); large ones straight from mmap.
#include "workloads/models/cpu_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include "harness/core/memory_limits.h"

namespace sb::models {
namespace {

// The compute thread's phase (set_cpu_phase): read under the allocator's lock when a peak rises.
// The two are stored apart, so a peak raised by another thread exactly while the phase changes
// can pair one phase's name with the other's unit: an attribution, not an invariant.
std::atomic<const char*> phase_what{""};
std::atomic<int> phase_index{-1};

constexpr std::size_t kMinCached = std::size_t{1} << 20;  // smaller: the default allocator
constexpr std::size_t kClass = std::size_t{1} << 16;      // size classes of 64 KiB
constexpr std::size_t kHuge = std::size_t{2} << 20;       // THP size and alignment

// A large block of `size` bytes (a multiple of kClass), kHuge aligned, from mmap: never from
// glibc's heap, where a long-lived one (a master shard) pins the freed ones around it
// (building gpt2-large's engine held 2x its master weights in such holes: measured, one rank,
// 6.4 GiB for 3.1). Its own mmap rather than glibc's fixed mmap threshold (mallopt), which
// would also have sent every malloc of 1 MiB and more by other code to mmap and munmap:
// Open MPI's per-call temporary buffers page-faulted on every call (a 4 MiB MPI_Allreduce on
// two ranks took 1130-1384 us with it, 369-404 us without).
void* map_block(std::size_t size) {
  void* raw = mmap(nullptr, size + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (base + kHuge - 1) / kHuge * kHuge;
  if (aligned > base) munmap(raw, aligned - base);
  const std::size_t tail = base + size + kHuge - (aligned + size);
  if (tail) munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, size, MADV_HUGEPAGE);  // advisory: fewer, larger faults where THP allows
  return p;
}

// What a block goes back to the OS by: munmap for a large one (size > 0), free for a small one.
struct Freed {
  void* p;
  std::size_t size;
};
void give_back(const std::vector<Freed>& out) {
  for (const auto& f : out)
    if (f.size) munmap(f.p, f.size);
    else std::free(f.p);
}

// Cache at most a quarter of the memory this process may use, shared with the other ranks of
// its node: the smallest of the machine's RAM, the memory cgroup's limit and `ulimit -v`
// (sb::memory_limits), divided by the ranks on the node (Open MPI's
// OMPI_COMM_WORLD_LOCAL_SIZE, else Slurm's SLURM_NTASKS_PER_NODE, else 1). Beyond it, freed
// blocks go back to the OS. (A quarter of the machine per process let two ranks of gpt2-xl
// with its optimizer on disk hold 12 GB of free blocks, past a 16 GiB cgroup.)
// SB_CPU_CACHE_LIMIT (bytes, or with a K, M or G suffix) sets it instead.
std::uint64_t default_cache_limit() {
  if (const char* v = std::getenv("SB_CPU_CACHE_LIMIT"); v && *v) {
    char* end = nullptr;
    const double x = std::strtod(v, &end);
    const char unit = end && *end ? *end : ' ';
    const double scale = unit == 'K' || unit == 'k' ? 1024.0
                         : unit == 'M' || unit == 'm' ? 1048576.0
                         : unit == 'G' || unit == 'g' ? 1073741824.0 : 1.0;
    if (x >= 0) return static_cast<std::uint64_t>(x * scale);
  }
  const sb::MemoryLimits l = sb::memory_limits();
  std::uint64_t mem = l.machine > 0 ? l.machine : std::uint64_t{16} << 30;
  for (const std::uint64_t other : {l.cgroup, l.address_space})
    if (other > 0) mem = std::min(mem, other);
  std::uint64_t ranks = 1;
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = std::getenv(name); v && std::atoll(v) > 0) {
      ranks = static_cast<std::uint64_t>(std::atoll(v));
      break;
    }
  return mem / 4 / ranks;
}

class CachingCpuAllocator final : public c10::Allocator {
 public:
  CachingCpuAllocator() { limit_ = default_cache_limit(); }

  // Every block's context is its pointer, so raw_allocate / raw_deallocate (used by oneDNN's
  // scratchpads) work too; large live blocks are found by pointer to learn their size class.
  c10::DataPtr allocate(std::size_t n) override {
    void* p = nullptr;
    if (n < kMinCached) {
      if (posix_memalign(&p, 64, n == 0 ? 64 : n) != 0) throw std::bad_alloc();
      return {p, p, &CachingCpuAllocator::release, c10::Device(c10::DeviceType::CPU)};
    }
    const std::size_t size = (n + kClass - 1) / kClass * kClass;
    {
      std::lock_guard<std::mutex> lk(m_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        p = it->second.back().p;  // the most recently freed: likeliest still in cache
        it->second.pop_back();
        stats_.cached_bytes -= size;
        ++stats_.hits;
      } else {
        ++stats_.misses;
      }
    }
    if (!p) p = map_block(size);
    {
      std::lock_guard<std::mutex> lk(m_);
      live_[p] = size;
      stats_.live_bytes += size;
      if (stats_.live_bytes > stats_.peak_live_bytes) {
        stats_.peak_live_bytes = stats_.live_bytes;
        stats_.peak_what = phase_what.load(std::memory_order_relaxed);
        stats_.peak_index = phase_index.load(std::memory_order_relaxed);
      }
    }
    return {p, p, &CachingCpuAllocator::release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &CachingCpuAllocator::release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);  // plain host memory
  }

  CpuCacheStats stats() const {
    std::lock_guard<std::mutex> lk(m_);
    return stats_;
  }
  void clear() {
    std::lock_guard<std::mutex> lk(m_);
    for (auto& [size, blocks] : free_)
      for (const auto& b : blocks) munmap(b.p, size);
    free_.clear();
    stats_.cached_bytes = 0;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lk(m_);
    stats_.peak_live_bytes = stats_.live_bytes;
    stats_.peak_what = phase_what.load(std::memory_order_relaxed);
    stats_.peak_index = phase_index.load(std::memory_order_relaxed);
  }
  void set_limit(std::uint64_t bytes) {
    std::vector<Freed> out;
    {
      std::lock_guard<std::mutex> lk(m_);
      limit_ = bytes;
      while (stats_.cached_bytes > limit_) out.push_back(evict_oldest());
    }
    give_back(out);
  }

 private:
  static void release(void* p);
  // Over the limit, the least recently freed blocks go back to the OS, not the one just freed:
  // a process whose sizes change (a benchmark running one model after another, inference
  // after training) would otherwise keep the old sizes cached forever and page-fault every
  // new block on every step.
  void put(void* p) {
    std::vector<Freed> out;
    {
      std::lock_guard<std::mutex> lk(m_);
      auto it = live_.find(p);
      if (it != live_.end()) stats_.live_bytes -= it->second;
      if (it == live_.end()) {
        out.push_back({p, 0});  // a small block
      } else if (it->second > limit_) {
        out.push_back({p, it->second});
        live_.erase(it);
      } else {
        const std::size_t size = it->second;
        live_.erase(it);
        while (stats_.cached_bytes + size > limit_) out.push_back(evict_oldest());
        free_[size].push_back({p, ++seq_});
        stats_.cached_bytes += size;
      }
    }
    give_back(out);
  }
  // Removes the cached block freed longest ago (each class's vector is in freeing order) and
  // returns it; the caller unmaps it outside the lock. Needs cached_bytes > 0.
  Freed evict_oldest() {
    auto oldest = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (!it->second.empty() &&
          (oldest == free_.end() || it->second.front().seq < oldest->second.front().seq))
        oldest = it;
    void* p = oldest->second.front().p;
    oldest->second.erase(oldest->second.begin());
    stats_.cached_bytes -= oldest->first;
    ++stats_.evictions;
    return {p, oldest->first};
  }

  struct Block {
    void* p;
    std::uint64_t seq;  // when it was freed (larger = later)
  };
  std::uint64_t limit_ = 0, seq_ = 0;
  mutable std::mutex m_;
  mutable std::map<std::size_t, std::vector<Block>> free_;
  mutable std::unordered_map<void*, std::size_t> live_;  // large blocks in use -> size class
  mutable CpuCacheStats stats_;
};

CachingCpuAllocator& instance() {
  static auto* a = new CachingCpuAllocator();  // never destroyed: tensors may outlive main
  return *a;
}

void CachingCpuAllocator::release(void* p) { instance().put(p); }

const bool installed = [] {
  const char* env = std::getenv("SB_CPU_ALLOCATOR");
  if (env && std::strcmp(env, "default") == 0) return false;
  c10::SetCPUAllocator(&instance(), /*priority=*/10);
  return c10::GetCPUAllocator() == &instance();
}();

}  // namespace

CpuCacheStats cpu_cache_stats() {
  auto s = instance().stats();
  s.installed = installed;
  return s;
}

void release_cpu_cache() { instance().clear(); }

void reset_cpu_peak() { instance().reset_peak(); }

void set_cpu_phase(const char* what, int index) {
  phase_what.store(what, std::memory_order_relaxed);
  phase_index.store(index, std::memory_order_relaxed);
}

std::string cpu_peak_phase(const CpuCacheStats& s) {
  std::string out = s.peak_what ? s.peak_what : "";
  if (!out.empty() && s.peak_index >= 0) out += " " + std::to_string(s.peak_index);
  return out;
}

void set_cpu_cache_limit(std::uint64_t bytes) { instance().set_limit(bytes); }

}  // namespace sb::models
