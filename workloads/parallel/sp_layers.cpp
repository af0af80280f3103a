// The sp all-to-all as an autograd function (sp_layers.h).
#include "workloads/parallel/sp_layers.h"

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
  SB_CHECK(t.dim() >= 1 && t.size(0) == c.size(Group::Sp), "the sp all-to-all takes (sp, ...) "
           "blocks: got {} blocks for mesh.sp = {}", t.dim() ? t.size(0) : 0, c.size(Group::Sp));
  const auto in = t.contiguous();
  torch::Tensor out = torch::empty_like(in);
  c.all_to_all(in, out, Group::Sp, kind);
  return out;
}

struct AllToAllSp : torch::autograd::Function<AllToAllSp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return exchanged(x, comm_from(comm), "sp_act");
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    return {exchanged(g[0], comm_from(ctx->saved_data["comm"].toInt()), "sp_grad"), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor all_to_all_sp(const torch::Tensor& blocks, Communicator& c) {
  if (c.size(Group::Sp) == 1) return blocks;
  return AllToAllSp::apply(blocks, comm_handle(c));
}

models::SequenceParallel sequence_parallel(Communicator& c) {
  models::SequenceParallel sp;
  sp.rank = c.rank(Group::Sp);
  sp.size = c.size(Group::Sp);
  Communicator* cp = &c;
  sp.all_to_all = [cp](const torch::Tensor& t) { return all_to_all_sp(t, *cp); };
  return sp;
}

}  // namespace sb::parallel
