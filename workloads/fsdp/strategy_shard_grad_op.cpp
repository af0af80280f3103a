// shard_grad_op (ZeRO stage 2): parameters, gradients and optimizer state sharded; a unit's
// parameters are gathered for its forward and stay gathered until its backward is done
// (no re-gather), gradients are reduce-scattered as backward produces them.
#include "harness/workload.h"
#include "workloads/fsdp/strategy.h"

namespace sb::fsdp {
namespace {

class ShardGradOp final : public Strategy {
 public:
  void reduce_grad(Collectives& c, const std::string& key, const torch::Tensor& g,
                   const torch::Tensor& out, std::vector<comm::Request>& pending) const override {
    pending.push_back(c.reduce_scatter_grads(key, g, out, comm::Group::World));
  }
};

sb::Registrar reg([] {
  StrategyInfo info;
  info.layout.params_sharded = info.layout.grads_sharded = info.layout.optim_sharded = true;
  info.layout.reshard_after_forward = false;
  info.collectives = {{comm::CollectiveKind::GradReduceScatter, StepPhase::backward,
                       MeshDim::dp_shard, Extent::unit, Payload::grads}};
  info.make = [] { return std::make_unique<ShardGradOp>(); };
  register_strategy("shard_grad_op", "ZeRO-2: params kept gathered from forward to backward",
                    std::move(info));
});

}  // namespace
}  // namespace sb::fsdp
