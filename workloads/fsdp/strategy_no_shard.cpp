// no_shard (DDP): full replicas of parameters, gradients and optimizer state on every rank;
// each unit's gradient is all-reduced as soon as backward produced it (one bucket per unit),
// overlapping the backward of the units before it.
#include "harness/workload.h"
#include "workloads/fsdp/strategy.h"

namespace sb::fsdp {
namespace {

sb::Registrar reg([] {
  StrategyInfo info;
  // Layout: everything replicated (the default).
  info.collectives = {{comm::CollectiveKind::GradAllReduce, StepPhase::backward, MeshDim::dp,
                       Extent::unit, Payload::grads}};
  register_strategy("no_shard", "DDP: replicated state, per-unit gradient all-reduce",
                    std::move(info));
});

}  // namespace
}  // namespace sb::fsdp
