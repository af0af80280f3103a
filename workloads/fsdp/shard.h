// Shard arithmetic and flat-buffer layout: pure functions, no MPI, no tensors.
// A unit's parameters are laid out back to back in one flat buffer (UnitSpec order), padded
// at the end to a multiple of the group size N; rank r owns the contiguous elements
// [r * S, (r + 1) * S) with S = padded / N.
#pragma once
#include <cstdint>
#include <vector>

namespace sb::fsdp {

struct ShardRange {
  std::int64_t padded = 0;  // flat buffer length: numel rounded up to a multiple of N
  std::int64_t size = 0;    // S = padded / N, the same on every rank
  std::int64_t offset = 0;  // r * S
  std::int64_t valid = 0;   // elements of this shard that are real parameters (rest: padding)
};

// Refuses numel < 0, group_size < 1 and rank outside [0, group_size) with an sb::Error.
ShardRange shard_range(std::int64_t numel, int group_size, int rank);

// Where each parameter sits in its unit's flat buffer.
struct FlatLayout {
  std::vector<std::int64_t> offsets, numels;  // per parameter, in UnitSpec order
  std::int64_t numel = 0;                     // sum of numels (unpadded)
};
FlatLayout flat_layout(const std::vector<std::int64_t>& param_numels);

}  // namespace sb::fsdp
