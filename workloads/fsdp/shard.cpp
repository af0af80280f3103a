// Shard arithmetic (see shard.h). Kept free of MPI and LibTorch calls so it is unit-testable.
#include "workloads/fsdp/shard.h"

#include <algorithm>

#include "harness/core/check.h"

namespace sb::fsdp {

ShardRange shard_range(std::int64_t numel, int group_size, int rank) {
  SB_CHECK(numel >= 0, "a unit cannot have {} parameters", numel);
  SB_CHECK(group_size >= 1, "group size {} must be at least 1", group_size);
  SB_CHECK(rank >= 0 && rank < group_size, "rank {} is outside the group of {} ranks", rank,
           group_size);
  ShardRange s;
  s.size = (numel + group_size - 1) / group_size;
  s.padded = s.size * group_size;
  s.offset = s.size * rank;
  s.valid = std::clamp<std::int64_t>(numel - s.offset, 0, s.size);
  return s;
}

FlatLayout flat_layout(const std::vector<std::int64_t>& param_numels) {
  FlatLayout l;
  for (std::int64_t n : param_numels) {
    SB_CHECK(n >= 0, "parameter {} has {} elements", l.offsets.size(), n);
    l.offsets.push_back(l.numel);
    l.numels.push_back(n);
    l.numel += n;
  }
  return l;
}

}  // namespace sb::fsdp
