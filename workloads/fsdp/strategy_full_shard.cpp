// full_shard (ZeRO stage 3): parameters, gradients and optimizer state sharded over the
// world; a unit's parameters are gathered just before its forward and freed right after,
// gathered again for its backward, and its gradient is reduce-scattered while the earlier
// units' backward runs.
#include "harness/workload.h"
#include "workloads/fsdp/strategy.h"

namespace sb::fsdp {
namespace {

sb::Registrar reg([] {
  StrategyInfo info;
  info.layout = fully_sharded(/*reshard_after_forward=*/true);
  info.collectives = {grad_reduce_scatter()};
  register_strategy("full_shard", "ZeRO-3: params gathered per unit, freed after use",
                    std::move(info));
});

}  // namespace
}  // namespace sb::fsdp
