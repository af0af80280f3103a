// zero1 (ZeRO stage 1): optimizer state sharded over the world; parameters and gradients
// replicated. Gradients are all-reduced (full), each rank updates its 1/N slice of the
// replica, and the updated slices are all-gathered back into every replica after the step,
// through the compression policy's parameter compressor.
#include "harness/workload.h"
#include "workloads/fsdp/strategy.h"

namespace sb::fsdp {
namespace {

class Zero1 final : public Strategy {
 public:
  // reduce_grad: the record's (Strategy's default): the gradient all-reduce over dp.
  void after_update(Collectives& c, const torch::Tensor& master,
                    const ShardRange& r) const override {
    // MPI forbids overlapping send and receive buffers: send a copy of the own slice.
    auto mine = master.narrow(0, r.offset, r.size).clone();  // (S) fp32
    c.all_gather_params_now(mine, master, c.group(record(), MeshDim::dp));
    // master is this rank's optimizer master too: a compressed gather must not round it.
    // The other ranks' slices stay as they arrived (rounded), so ranks compute with
    // replicas that differ in their own slice only (docs/COMPRESSION.md, "zero1").
    if (c.compresses(comm::CollectiveKind::ParamAllGather))
      master.narrow(0, r.offset, r.size).copy_(mine);
  }
};

sb::Registrar reg([] {
  StrategyInfo info;
  info.layout.optim_sharded = true;  // params and grads replicated
  info.collectives = {{comm::CollectiveKind::GradAllReduce, StepPhase::backward, MeshDim::dp,
                       Extent::unit, Payload::grads},
                      {comm::CollectiveKind::ParamAllGather, StepPhase::after_optimizer,
                       MeshDim::dp_shard, Extent::unit, Payload::master}};
  info.make = [] { return std::make_unique<Zero1>(); };
  register_strategy("zero1", "ZeRO-1: optimizer state sharded, params all-gathered after step",
                    std::move(info));
});

}  // namespace
}  // namespace sb::fsdp
