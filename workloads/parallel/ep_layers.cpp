// The ep all-to-all as an autograd function (ep_layers.h).
#include "workloads/parallel/ep_layers.h"

#include "workloads/comm/communicator.h"
#include "workloads/parallel/all_to_all.h"

namespace sb::parallel {

torch::Tensor all_to_all_ep(const torch::Tensor& blocks, comm::Communicator& c, bool dispatch,
                            std::shared_ptr<double> backward_s) {
  return all_to_all_blocks(blocks, c, comm::Group::Ep, dispatch ? "ep_dispatch" : "ep_combine", "ep_grad",
                           std::move(backward_s));
}

models::ExpertParallel expert_parallel(comm::Communicator& c) {
  models::ExpertParallel ep;
  ep.rank = c.rank(comm::Group::Ep);
  ep.size = c.size(comm::Group::Ep);
  comm::Communicator* cp = &c;
  ep.all_to_all = [cp](const torch::Tensor& t, bool dispatch, const std::shared_ptr<double>& backward_s) {
    return all_to_all_ep(t, *cp, dispatch, backward_s);
  };
  ep.max = [cp](std::int64_t n) {
    return static_cast<std::int64_t>(cp->all_reduce_scalar(static_cast<double>(n), comm::Group::Ep, comm::ReduceOp::Max));
  };
  ep.exchange = [cp](const torch::Tensor& t, const char* kind) {
    const auto in = t.contiguous();
    auto out = torch::empty_like(in);
    cp->all_to_all(in, out, comm::Group::Ep, kind);
    return out;
  };
  ep.gather = [cp](const torch::Tensor& t, const char* kind) {
    const auto in = t.contiguous();
    std::vector<std::int64_t> shape{cp->size(comm::Group::Ep)};
    shape.insert(shape.end(), in.sizes().begin(), in.sizes().end());
    auto out = torch::empty(shape, in.options());
    cp->all_gather(in, out, comm::Group::Ep, kind);
    return out;
  };
  return ep;
}

}  // namespace sb::parallel
