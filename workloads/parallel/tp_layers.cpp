// Megatron's tensor-parallel regions and layers (tp_layers.h).
#include "workloads/parallel/tp_layers.h"

#include <torch/autograd.h>

#include "harness/core/check.h"
#include "workloads/comm/communicator.h"

namespace sb::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using comm::Communicator;
using comm::Group;

// The communicator crosses autograd as an integer (saved_data holds IValues only).
std::int64_t handle(Communicator& c) { return reinterpret_cast<std::intptr_t>(&c); }
Communicator& from(std::int64_t h) { return *reinterpret_cast<Communicator*>(static_cast<std::intptr_t>(h)); }

// A sum over tp into a fresh tensor (the collective writes raw memory: communicator.h).
torch::Tensor summed(const torch::Tensor& t, Communicator& c, const char* kind) {
  torch::Tensor out = t.contiguous().clone();
  c.all_reduce(out, Group::Tp, kind);
  return out;
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x.view_as(x);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    return {summed(g[0], from(ctx->saved_data["comm"].toInt()), "tp_grad"), torch::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    return summed(x, from(comm), "tp_act");
  }
  static tensor_list backward(AutogradContext*, tensor_list g) { return {g[0], torch::Tensor()}; }
};

torch::Tensor block(const torch::Tensor& full, int dim, int rank, int size) {
  SB_CHECK(size >= 1 && rank >= 0 && rank < size, "tensor-parallel rank {} of {}", rank, size);
  const std::int64_t n = full.size(dim);
  SB_CHECK(n % size == 0, "tensor parallelism splits dimension {} ({} long) into mesh.tp = {} "
           "equal blocks: it must divide by tp (choose a tp that divides the model's heads and "
           "hidden sizes)", dim, n, size);
  return full.narrow(dim, rank * (n / size), n / size).contiguous();
}

}  // namespace

torch::Tensor copy_to_tp(const torch::Tensor& x, Communicator& c) {
  if (c.size(Group::Tp) == 1) return x;
  return CopyToTp::apply(x, handle(c));
}

torch::Tensor reduce_from_tp(const torch::Tensor& x, Communicator& c) {
  if (c.size(Group::Tp) == 1) return x;
  return ReduceFromTp::apply(x, handle(c));
}

torch::Tensor column_parallel(const torch::Tensor& x, const torch::Tensor& w_r,
                              const torch::Tensor& b_r, Communicator& c) {
  return at::linear(copy_to_tp(x, c), w_r, b_r);
}

torch::Tensor row_parallel(const torch::Tensor& x_r, const torch::Tensor& w_r,
                           const torch::Tensor& b, Communicator& c) {
  torch::Tensor y = reduce_from_tp(at::linear(x_r, w_r), c);
  return b.defined() ? y + b : y;
}

torch::Tensor column_shard(const torch::Tensor& full, int rank, int size) {
  return block(full, 0, rank, size);
}

torch::Tensor row_shard(const torch::Tensor& full, int rank, int size) {
  return block(full, 1, rank, size);
}

}  // namespace sb::parallel
