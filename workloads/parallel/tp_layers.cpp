// Megatron's tensor-parallel regions and layers (tp_layers.h).
#include "workloads/parallel/tp_layers.h"

#include <memory>

#include <torch/autograd.h>

#include "harness/core/check.h"
#include "workloads/comm/communicator.h"
#include "workloads/parallel/comm_handle.h"
#include "workloads/comm/compressed_collectives.h"

namespace sb::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using comm::Communicator;
using comm::Group;

// The communicator crosses autograd as an integer (comm_handle.h).
std::int64_t handle(Communicator& c) { return comm_handle(c); }
Communicator& from(std::int64_t h) { return comm_from(h); }

// The compression policy's codecs for tp traffic (comm::Policy::tp_act / tp_grad; null: plain).
struct TpCodecs {
  std::unique_ptr<comm::Compressor> act, grad;
};
std::int64_t handle(const TpCodecs* k) { return reinterpret_cast<std::intptr_t>(k); }
comm::Compressor* codec(std::int64_t h, bool grad) {
  const auto* k = reinterpret_cast<const TpCodecs*>(static_cast<std::intptr_t>(h));
  return k ? (grad ? k->grad.get() : k->act.get()) : nullptr;
}

// A sum over tp into a fresh tensor (the collective writes raw memory: communicator.h); with a
// codec, the compressed all-reduce (compressed_collectives.h: every rank the same result),
// its fp32 sum cast back to t's dtype.
torch::Tensor summed(const torch::Tensor& t, Communicator& c, const char* kind,
                     comm::Compressor* codec = nullptr) {
  if (codec)
    return comm::compressed_all_reduce(t.reshape({-1}).to(torch::kFloat32), *codec, c, Group::Tp,
                                       nullptr, nullptr, {}, kind)
        .view(t.sizes()).to(t.scalar_type());
  torch::Tensor out = t.contiguous().clone();
  c.all_reduce(out, Group::Tp, kind);
  return out;
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm,
                               std::int64_t codecs) {
    ctx->saved_data["comm"] = comm;
    ctx->saved_data["codecs"] = codecs;
    return x.view_as(x);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    return {summed(g[0], from(ctx->saved_data["comm"].toInt()), "tp_grad",
                   codec(ctx->saved_data["codecs"].toInt(), true)),
            torch::Tensor(), torch::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm,
                               std::int64_t codecs) {
    return summed(x, from(comm), "tp_act", codec(codecs, false));
  }
  static tensor_list backward(AutogradContext*, tensor_list g) {
    return {g[0], torch::Tensor(), torch::Tensor()};
  }
};

// Row blocks over tp (x: (rows, ...) contiguous; the collectives write raw memory).
torch::Tensor gathered(const torch::Tensor& x_r, Communicator& c, const char* kind) {
  auto shape = x_r.sizes().vec();
  shape[0] *= c.size(Group::Tp);
  torch::Tensor full = torch::empty(shape, x_r.options());
  c.all_gather(x_r.contiguous(), full, Group::Tp, kind);
  return full;
}
torch::Tensor scattered(const torch::Tensor& x, Communicator& c, const char* kind) {
  const int n = c.size(Group::Tp);
  SB_CHECK(x.size(0) % n == 0, "sequence parallelism splits {} rows (batch rows x sequence) into "
           "mesh.tp = {} equal blocks: they must divide by tp; choose a batch and seq whose "
           "product per data-parallel rank divides by tp", x.size(0), n);
  auto shape = x.sizes().vec();
  shape[0] /= n;
  torch::Tensor out = torch::empty(shape, x.options());
  c.reduce_scatter(x.contiguous(), out, Group::Tp, kind);
  return out;
}

struct GatherRows : torch::autograd::Function<GatherRows> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return gathered(x, from(comm), "tp_act");
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    return {scattered(g[0], from(ctx->saved_data["comm"].toInt()), "tp_grad"), torch::Tensor()};
  }
};

struct ScatterRows : torch::autograd::Function<ScatterRows> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return scattered(x, from(comm), "tp_act");
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    return {gathered(g[0], from(ctx->saved_data["comm"].toInt()), "tp_grad"), torch::Tensor()};
  }
};

struct AllRows : torch::autograd::Function<AllRows> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    ctx->saved_data["rows"] = x.size(0);
    return gathered(x, from(comm), "tp_act");
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const std::int64_t n = ctx->saved_data["rows"].toInt();
    const int r = from(ctx->saved_data["comm"].toInt()).rank(Group::Tp);
    return {g[0].narrow(0, r * n, n).contiguous(), torch::Tensor()};
  }
};

// Megatron's LinearWithGradAccumulationAndAsyncCommunication, synchronous: y = gather(x_r) w^T
// + b; backward gathers x_r again for w's gradient and reduce-scatters x's.
struct GatheredLinear : torch::autograd::Function<GatheredLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_r, const torch::Tensor& w,
                               const torch::Tensor& b, std::int64_t comm) {
    ctx->saved_data["comm"] = comm;
    const bool bias = b.numel() > 0;  // an empty b: none (autograd functions take no undefined inputs)
    ctx->saved_data["bias"] = bias;
    ctx->save_for_backward({x_r, w});
    return at::linear(gathered(x_r, from(comm), "tp_act"), w, bias ? b : torch::Tensor());
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    Communicator& c = from(ctx->saved_data["comm"].toInt());
    const auto s = ctx->get_saved_variables();
    const auto x = gathered(s[0], c, "tp_act").reshape({-1, s[1].size(1)});
    const auto gy = g[0].reshape({-1, s[1].size(0)});
    auto gx = scattered(at::matmul(gy, s[1]), c, "tp_grad").view(s[0].sizes());
    auto gw = at::matmul(gy.t(), x);
    auto gb = ctx->saved_data["bias"].toBool() ? gy.sum(0) : torch::Tensor();
    return {gx, gw, gb, torch::Tensor()};
  }
};

// Saved: the softmax of this rank's columns, where each row's target is among them, and the
// rows kept; the backward needs nothing from other ranks.
struct VocabParallelCe : torch::autograd::Function<VocabParallelCe> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits_r,
                               const torch::Tensor& targets, std::int64_t begin, std::int64_t comm) {
    Communicator& c = from(comm);
    const auto l = logits_r.to(torch::kFloat32);
    const std::int64_t n = l.size(1);
    // A shift common to every rank (logsumexp's): the row maxima over the whole vocabulary.
    torch::Tensor top = std::get<0>(l.max(1)).contiguous();
    c.all_reduce(top, Group::Tp, "tp_act", comm::ReduceOp::Max);
    const auto e = (l - top.unsqueeze(1)).exp_();
    const auto kept = targets != -100;
    const auto mine = kept & (targets >= begin) & (targets < begin + n);
    const auto col = torch::where(mine, targets - begin, torch::zeros_like(targets));
    const auto picked = l.gather(1, col.unsqueeze(1)).squeeze(1) * mine.to(torch::kFloat32);
    torch::Tensor sums = torch::stack({e.sum(1), picked}, 1).contiguous();  // (N, 2)
    c.all_reduce(sums, Group::Tp, "tp_act");
    const auto count = kept.sum().to(torch::kFloat32);
    const auto rows = (sums.select(1, 0).log() + top - sums.select(1, 1)) * kept.to(torch::kFloat32);
    ctx->save_for_backward({e / sums.select(1, 0).unsqueeze(1), col, mine, kept, count});
    ctx->saved_data["dtype"] = static_cast<std::int64_t>(logits_r.scalar_type());
    return rows.sum() / count;
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list g) {
    const auto s = ctx->get_saved_variables();
    auto grad = s[0].clone();  // softmax (N, V_r)
    const auto rows = torch::arange(grad.size(0), s[1].options());
    const auto hit = s[2].nonzero().squeeze(1);
    grad.index_put_({rows.index_select(0, hit), s[1].index_select(0, hit)},
                    grad.index({rows.index_select(0, hit), s[1].index_select(0, hit)}) - 1.0);
    grad.mul_((s[3].to(torch::kFloat32) * (g[0] / s[4])).unsqueeze(1));
    const auto dt = static_cast<c10::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dt), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
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

namespace {
// f and g with the policy's codecs (null: plain all-reduces).
torch::Tensor copy_to(const torch::Tensor& x, Communicator& c, const TpCodecs* codecs) {
  if (c.size(Group::Tp) == 1) return x;
  return CopyToTp::apply(x, handle(c), handle(codecs));
}
torch::Tensor reduce_from(const torch::Tensor& x, Communicator& c, const TpCodecs* codecs) {
  if (c.size(Group::Tp) == 1) return x;
  return ReduceFromTp::apply(x, handle(c), handle(codecs));
}
}  // namespace

torch::Tensor copy_to_tp(const torch::Tensor& x, Communicator& c) { return copy_to(x, c, nullptr); }

torch::Tensor reduce_from_tp(const torch::Tensor& x, Communicator& c) { return reduce_from(x, c, nullptr); }

torch::Tensor column_parallel(const torch::Tensor& x, const torch::Tensor& w_r,
                              const torch::Tensor& b_r, Communicator& c) {
  return at::linear(copy_to_tp(x, c), w_r, b_r);
}

torch::Tensor row_parallel(const torch::Tensor& x_r, const torch::Tensor& w_r,
                           const torch::Tensor& b, Communicator& c) {
  torch::Tensor y = reduce_from_tp(at::linear(x_r, w_r), c);
  return b.defined() ? y + b : y;
}

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits_r, const torch::Tensor& targets,
                                           std::int64_t vocab_begin, Communicator& c) {
  SB_CHECK(logits_r.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits_r.size(0),
           "vocab_parallel_cross_entropy: logits (N, V_r) and targets (N), got {} and {} dims",
           logits_r.dim(), targets.dim());
  return VocabParallelCe::apply(logits_r, targets, vocab_begin, handle(c));
}

torch::Tensor gather_rows_tp(const torch::Tensor& x_r, Communicator& c) {
  if (c.size(Group::Tp) == 1) return x_r;
  return GatherRows::apply(x_r, handle(c));
}

torch::Tensor scatter_rows_tp(const torch::Tensor& x, Communicator& c) {
  if (c.size(Group::Tp) == 1) return x;
  return ScatterRows::apply(x, handle(c));
}

torch::Tensor all_rows_tp(const torch::Tensor& x_r, Communicator& c) {
  if (c.size(Group::Tp) == 1) return x_r;
  return AllRows::apply(x_r, handle(c));
}

torch::Tensor gathered_linear_tp(const torch::Tensor& x_r, const torch::Tensor& w,
                                 const torch::Tensor& b, Communicator& c) {
  if (c.size(Group::Tp) == 1) return at::linear(x_r, w, b);
  return GatheredLinear::apply(x_r, w, b.defined() ? b : torch::empty({0}, w.options()), handle(c));
}

models::TensorParallel tensor_parallel(Communicator& c, bool sequence_parallel,
                                       const comm::Policy& policy) {
  models::TensorParallel tp;
  tp.rank = c.rank(Group::Tp);
  tp.size = c.size(Group::Tp);
  tp.sequence_parallel = sequence_parallel;
  // Codecs for the all-reduces of Megatron's f and g (the sequence-parallel collectives and
  // the cross-entropy's stay plain: train_mesh.cpp refuses compressing them).
  auto codecs = std::make_shared<TpCodecs>();
  if (policy.compresses(comm::CollectiveKind::TpAct)) codecs->act = comm::make_compressor(policy.tp_act);
  if (policy.compresses(comm::CollectiveKind::TpGrad)) codecs->grad = comm::make_compressor(policy.tp_grad);
  // The lambdas own the codecs (the model outlives no graph of theirs).
  tp.copy_to = [&c, codecs](const torch::Tensor& x) { return copy_to(x, c, codecs.get()); };
  tp.reduce_from = [&c, codecs](const torch::Tensor& x) { return reduce_from(x, c, codecs.get()); };
  tp.gather_rows = [&c](const torch::Tensor& x) { return gather_rows_tp(x, c); };
  tp.scatter_rows = [&c](const torch::Tensor& x) { return scatter_rows_tp(x, c); };
  tp.all_rows = [&c](const torch::Tensor& x) { return all_rows_tp(x, c); };
  tp.gathered_linear = [&c](const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
    return gathered_linear_tp(x, w, b, c);
  };
  tp.cross_entropy = [&c](const torch::Tensor& l, const torch::Tensor& t, std::int64_t begin) {
    return vocab_parallel_cross_entropy(l, t, begin, c);
  };
  return tp;
}

torch::Tensor column_shard(const torch::Tensor& full, int rank, int size) {
  return block(full, 0, rank, size);
}

torch::Tensor row_shard(const torch::Tensor& full, int rank, int size) {
  return block(full, 1, rank, size);
}

}  // namespace sb::parallel
