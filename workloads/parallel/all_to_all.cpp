// The block all-to-all autograd function (all_to_all.h).
#include "workloads/parallel/all_to_all.h"

#include <chrono>

#include <torch/autograd.h>
#include <ATen/core/ivalue.h>

#include "harness/core/check.h"
#include "workloads/comm/communicator.h"
#include "workloads/parallel/comm_handle.h"

namespace sb::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// A fresh output: the collective writes raw memory (communicator.h).
torch::Tensor exchanged(const torch::Tensor& t, comm::Communicator& c, comm::Group g, const std::string& kind) {
  SB_CHECK(t.dim() >= 1 && t.size(0) == c.size(g), "the {} all-to-all takes ({}, ...) blocks: got {} "
           "blocks for mesh.{} = {}", comm::group_name(g), comm::group_name(g), t.dim() ? t.size(0) : 0,
           comm::group_name(g), c.size(g));
  const auto in = t.contiguous();
  torch::Tensor out = torch::empty_like(in);
  c.all_to_all(in, out, g, kind);
  return out;
}

// Where the backward's seconds go: a capsule in the saved data owns it with the graph.
struct SecondsSink : torch::CustomClassHolder {
  std::shared_ptr<double> s;
};

struct AllToAll : torch::autograd::Function<AllToAll> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm, std::int64_t group,
                               const std::string& kind, const std::string& grad_kind,
                               const std::shared_ptr<double>& backward_s) {
    ctx->saved_data["comm"] = comm;
    ctx->saved_data["group"] = group;
    ctx->saved_data["grad_kind"] = grad_kind;
    if (backward_s) {
      auto sink = c10::make_intrusive<SecondsSink>();
      sink->s = backward_s;
      ctx->saved_data["seconds"] = c10::IValue::make_capsule(std::move(sink));
    }
    return exchanged(x, comm_from(comm), static_cast<comm::Group>(group), kind);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const auto group = static_cast<comm::Group>(ctx->saved_data["group"].toInt());
    const auto t0 = std::chrono::steady_clock::now();
    auto out = exchanged(g[0], comm_from(ctx->saved_data["comm"].toInt()), group,
                         ctx->saved_data["grad_kind"].toStringRef());
    if (const auto it = ctx->saved_data.find("seconds"); it != ctx->saved_data.end()) {
      const auto sink = it->second.toCapsule();  // a SecondsSink: forward put it there
      *static_cast<SecondsSink*>(sink.get())->s +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return {out, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor all_to_all_blocks(const torch::Tensor& blocks, comm::Communicator& c, comm::Group g,
                                const std::string& kind, const std::string& grad_kind,
                                std::shared_ptr<double> backward_s) {
  if (c.size(g) == 1) return blocks;
  return AllToAll::apply(blocks, comm_handle(c), static_cast<std::int64_t>(g), kind, grad_kind, backward_s);
}

}  // namespace sb::parallel
