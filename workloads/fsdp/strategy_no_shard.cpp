// no_shard (DDP): full replicas of parameters, gradients and optimizer state on every rank;
// each unit's gradient is all-reduced as soon as backward produced it (one bucket per unit),
// overlapping the backward of the units before it.
#include "harness/workload.h"
#include "workloads/fsdp/strategy.h"

namespace sb::fsdp {
namespace {

class NoShard final : public Strategy {
 public:
  void reduce_grad(Collectives& c, const std::string& key, const torch::Tensor& g,
                   const torch::Tensor& out, std::vector<comm::Request>& pending) const override {
    if (!out.is_same(g)) out.copy_(g);
    pending.push_back(c.all_reduce_grads(key, out, comm::Group::World));
  }
};

sb::Registrar reg([] {
  StrategyInfo info;
  // Layout: everything replicated (the default).
  info.collectives = {{comm::CollectiveKind::GradAllReduce, StepPhase::backward, MeshDim::dp,
                       Extent::unit, Payload::grads}};
  info.make = [] { return std::make_unique<NoShard>(); };
  register_strategy("no_shard", "DDP: replicated state, per-unit gradient all-reduce",
                    std::move(info));
});

}  // namespace
}  // namespace sb::fsdp
