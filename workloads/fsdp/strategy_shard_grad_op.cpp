// shard_grad_op (ZeRO stage 2): parameters, gradients and optimizer state sharded; a unit's
// parameters are gathered for its forward and stay gathered until its backward is done
// (no re-gather), gradients are reduce-scattered as backward produces them.
#include "harness/workload.h"
#include "workloads/fsdp/strategy.h"

namespace sb::fsdp {
namespace {

sb::Registrar reg([] {
  StrategyInfo info;
  info.layout = fully_sharded(/*reshard_after_forward=*/false);
  info.collectives = {grad_reduce_scatter()};
  register_strategy("shard_grad_op", "ZeRO-2: params kept gathered from forward to backward",
                    std::move(info));
});

}  // namespace
}  // namespace sb::fsdp
