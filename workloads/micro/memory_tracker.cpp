// Counting CPU allocator (see memory_tracker.h).
#include "workloads/micro/memory_tracker.h"

#include <algorithm>
#include <atomic>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace sb::micro {
namespace {

std::atomic<std::int64_t> g_live{0}, g_peak{0};
std::atomic<bool> g_installed{false};

// What the wrapped DataPtr owns: the original allocation and its size.
struct Block {
  c10::DataPtr inner;
  std::int64_t bytes;
};

void release(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  g_live.fetch_sub(b->bytes, std::memory_order_relaxed);
  delete b;  // frees the inner allocation through its own deleter
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr p = inner_->allocate(n);
    void* data = p.get();
    const c10::Device dev = p.device();
    auto* b = new Block{std::move(p), static_cast<std::int64_t>(n)};
    const std::int64_t live = g_live.fetch_add(b->bytes, std::memory_order_relaxed) + b->bytes;
    std::int64_t peak = g_peak.load(std::memory_order_relaxed);
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
    }
    return {data, b, &release, dev};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }  // no raw_allocate
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  c10::Allocator* inner_;
};

}  // namespace

void MemoryTracker::install() {
  bool expected = false;
  if (!g_installed.compare_exchange_strong(expected, true)) return;
  static CountingAllocator counting(c10::GetCPUAllocator());
  c10::SetCPUAllocator(&counting, /*priority=*/100);
}
bool MemoryTracker::installed() { return g_installed.load(); }
std::int64_t MemoryTracker::live_bytes() { return g_live.load(); }
std::int64_t MemoryTracker::peak_bytes() { return g_peak.load(); }
void MemoryTracker::reset_peak() { g_peak.store(g_live.load()); }

}  // namespace sb::micro
