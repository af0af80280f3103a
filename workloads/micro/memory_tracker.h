// Exact accounting of LibTorch CPU allocations: a c10 allocator that wraps the default CPU
// allocator and counts live and peak bytes. Installed on demand; used where a benchmark
// reports the peak memory of one operation (e.g. attention variants at long sequences),
// which process RSS cannot attribute.
#pragma once
#include <cstdint>

namespace sb::micro {

class MemoryTracker {
 public:
  // Installs the counting allocator (once per process; later calls are no-ops).
  static void install();
  static bool installed();
  static std::int64_t live_bytes();
  // Peak of live bytes since the last reset_peak(); reset_peak() sets it to live_bytes().
  static std::int64_t peak_bytes();
  static void reset_peak();
};

}  // namespace sb::micro
