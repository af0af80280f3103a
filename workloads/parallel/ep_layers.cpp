// The ep all-to-all as an autograd function (ep_layers.h).
#include "workloads/parallel/ep_layers.h"

#include "workloads/comm/communicator.h"
#include "workloads/parallel/all_to_all.h"

namespace sb::parallel {

torch::Tensor all_to_all_ep(const torch::Tensor& blocks, comm::Communicator& c, bool dispatch) {
  return all_to_all_blocks(blocks, c, comm::Group::Ep, dispatch ? "ep_dispatch" : "ep_combine", "ep_grad");
}

models::ExpertParallel expert_parallel(comm::Communicator& c) {
  models::ExpertParallel ep;
  ep.rank = c.rank(comm::Group::Ep);
  ep.size = c.size(comm::Group::Ep);
  comm::Communicator* cp = &c;
  ep.all_to_all = [cp](const torch::Tensor& t, bool dispatch) { return all_to_all_ep(t, *cp, dispatch); };
  ep.max = [cp](std::int64_t n) {
    return static_cast<std::int64_t>(cp->all_reduce_scalar(static_cast<double>(n), comm::Group::Ep, comm::ReduceOp::Max));
  };
  return ep;
}

}  // namespace sb::parallel
