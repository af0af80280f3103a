// The ep all-to-all as an autograd function (ep_layers.h).
#include "workloads/parallel/ep_layers.h"

#include <torch/autograd.h>

#include "harness/core/check.h"
#include "workloads/comm/communicator.h"
#include "workloads/parallel/comm_handle.h"

namespace sb::parallel {
namespace {

using comm::Communicator;
using comm::Group;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// A fresh output: the collective writes raw memory (communicator.h).
torch::Tensor exchanged(const torch::Tensor& t, Communicator& c, const char* kind) {
  SB_CHECK(t.dim() >= 1 && t.size(0) == c.size(Group::Ep), "the ep all-to-all takes (ep, ...) "
           "blocks: got {} blocks for mesh.ep = {}", t.dim() ? t.size(0) : 0, c.size(Group::Ep));
  const auto in = t.contiguous();
  torch::Tensor out = torch::empty_like(in);
  c.all_to_all(in, out, Group::Ep, kind);
  return out;
}

struct AllToAllEp : torch::autograd::Function<AllToAllEp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm, bool dispatch) {
    ctx->saved_data["comm"] = comm;
    return exchanged(x, comm_from(comm), dispatch ? "ep_dispatch" : "ep_combine");
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    return {exchanged(g[0], comm_from(ctx->saved_data["comm"].toInt()), "ep_grad"), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor all_to_all_ep(const torch::Tensor& blocks, Communicator& c, bool dispatch) {
  if (c.size(Group::Ep) == 1) return blocks;
  return AllToAllEp::apply(blocks, comm_handle(c), dispatch);
}

models::ExpertParallel expert_parallel(Communicator& c) {
  models::ExpertParallel ep;
  ep.rank = c.rank(Group::Ep);
  ep.size = c.size(Group::Ep);
  Communicator* cp = &c;
  ep.all_to_all = [cp](const torch::Tensor& t, bool dispatch) { return all_to_all_ep(t, *cp, dispatch); };
  ep.max = [cp](std::int64_t n) {
    return static_cast<std::int64_t>(cp->all_reduce_scalar(static_cast<double>(n), Group::Ep, comm::ReduceOp::Max));
  };
  return ep;
}

}  // namespace sb::parallel
