// hybrid_shard: full_shard within each shard group (one node: key shard_group, default the
// ranks per node), replicated across shard groups; a unit's gradient shard is summed across
// the replica group after the shard group's reduce-scatter. Parameter all-gathers never
// leave the shard group.
#include "harness/workload.h"
#include "workloads/fsdp/strategy.h"

namespace sb::fsdp {
namespace {

sb::Registrar reg([] {
  StrategyInfo info;
  info.layout = fully_sharded(/*reshard_after_forward=*/true);
  // The collective over dp_replicate makes the mesh hybrid: dp_shard = the shard group.
  info.collectives = {grad_reduce_scatter(),
                      {comm::CollectiveKind::GradAllReduce, StepPhase::backward,
                       MeshDim::dp_replicate, Extent::shard, Payload::grads,
                       /*skipped_on_one_rank=*/true}};
  register_strategy("hybrid_shard",
                    "full_shard within shard groups, gradient all-reduce across replicas",
                    std::move(info));
});

}  // namespace
}  // namespace sb::fsdp
