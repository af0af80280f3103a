// Wire bytes of a step from a strategy's record (wire_model.h).
#include "workloads/fsdp/wire_model.h"

#include "harness/core/check.h"
#include "workloads/comm/compressed_collectives.h"
#include "workloads/fsdp/shard.h"

namespace sb::fsdp {

std::map<comm::CollectiveKind, std::uint64_t> step_wire_bytes(
    const StrategyInfo& s, const std::vector<models::UnitSpec>& units,
    const std::vector<int>& acquires, const DpMesh& mesh, torch::ScalarType param_dtype,
    torch::ScalarType reduce_dtype, const comm::Policy& policy) {
  SB_CHECK(acquires.size() == units.size(), "{} acquire counts for {} units", acquires.size(),
           units.size());
  using K = comm::CollectiveKind;
  std::map<K, std::uint64_t> out{{K::ParamAllGather, 0}, {K::GradReduceScatter, 0}, {K::GradAllReduce, 0}};
  const auto elt = [&](Payload p) -> std::int64_t {
    switch (p) {
      case Payload::params: return static_cast<std::int64_t>(c10::elementSize(param_dtype));
      case Payload::master: return 4;
      case Payload::grads: break;
    }
    return static_cast<std::int64_t>(c10::elementSize(reduce_dtype));
  };
  const int n = s.shard_factor(mesh);
  for (std::size_t u = 0; u < units.size(); ++u) {
    const ShardRange r = shard_range(units[u].numel(), n, 0);
    for (const CollectiveUse& c : s.collectives) {
      const bool regather = c.kind == K::ParamAllGather && c.phase == StepPhase::backward;
      if (regather && acquires[u] > 1) continue;  // kept gathered from forward to backward
      out[c.kind] += static_cast<std::uint64_t>(comm::CompressedCollectives::wire_bytes_of(
          policy, c.kind, StrategyInfo::elements(c, r), mesh.size(c.over), elt(c.payload)));
    }
  }
  return out;
}

}  // namespace sb::fsdp
