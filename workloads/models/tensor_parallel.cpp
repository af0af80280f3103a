// Tensor-parallel blocks of parameters (tensor_parallel.h).
#include "workloads/models/tensor_parallel.h"

#include <fmt/ranges.h>  // fmt::join

#include "harness/core/check.h"
#include "workloads/models/model.h"

namespace sb::models {
namespace {

std::int64_t block_of(const ParamSpec& s, std::size_t dim, std::int64_t n) {
  SB_CHECK(n % s.tp_size == 0, "tensor parallelism splits {} along dimension {} ({} long) into "
           "mesh.tp = {} equal blocks: it must divide by tp; choose a tp that divides the "
           "model's heads and hidden sizes", s.name, dim, n, s.tp_size);
  return n / s.tp_size;
}

}  // namespace

std::string megatron_problem(const ModelConfig& c, int n) {
  if (n <= 1) return "";
  if (c.n_head % n != 0 || c.d_ff % n != 0)
    return fmt::format("mesh.tp = {} must divide the heads ({}) and the MLP width ({}) of model "
                       "'{}': tensor parallelism gives each tp rank whole heads and equal MLP "
                       "columns; choose a tp that divides both", n, c.n_head, c.d_ff, c.preset);
  if (c.vocab < n)
    return fmt::format("mesh.tp = {} exceeds the vocabulary ({}) of model '{}'", n, c.vocab, c.preset);
  return "";
}

void check_functions(const TensorParallel& tp, bool needs_all_rows) {
  SB_CHECK(tp.size == 1 || (tp.copy_to && tp.reduce_from && tp.cross_entropy),
           "set_tensor_parallel: the tp functions are not set");
  SB_CHECK(!tp.rows_split() || (tp.gather_rows && tp.scatter_rows && tp.gathered_linear &&
                                (!needs_all_rows || tp.all_rows)),
           "set_tensor_parallel: the sequence-parallel functions are not set");
}

std::pair<std::int64_t, std::int64_t> vocab_range(std::int64_t n, int rank, int size) {
  SB_CHECK(size >= 1 && rank >= 0 && rank < size && n >= size,
           "vocabulary of {} rows over tensor-parallel rank {} of {}", n, rank, size);
  return {n * rank / size, n * (rank + 1) / size};
}

ParamSpec tp_split(ParamSpec s, TpSplit how, int rank, int size) {
  if (size <= 1 || how == TpSplit::None) return s;
  s.tp = how, s.tp_rank = rank, s.tp_size = size;
  s.full_shape = s.shape;
  switch (how) {
    case TpSplit::Rows: s.shape[0] = block_of(s, 0, s.shape[0]); break;
    case TpSplit::Cols: s.shape[1] = block_of(s, 1, s.shape[1]); break;
    case TpSplit::QkvRows:
      SB_CHECK(s.shape[0] % 3 == 0, "{}: {} rows are not Q, K and V", s.name, s.shape[0]);
      s.shape[0] = 3 * block_of(s, 0, s.shape[0] / 3);
      break;
    case TpSplit::Vocab: {
      const auto [b, e] = vocab_range(s.shape[0], rank, size);
      s.shape[0] = e - b;
      break;
    }
    case TpSplit::None: break;
  }
  return s;
}

namespace {

// This rank's block of `full` as a view (QKV's as (3, A_r, rest), Q, K and V each narrowed).
torch::Tensor tp_block(const ParamSpec& s, const torch::Tensor& full) {
  SB_CHECK(full.sizes().vec() == s.full_shape, "{}: a whole tensor of shape {} to split over tp, "
           "got {}", s.name, fmt::join(s.full_shape, "x"), fmt::join(full.sizes(), "x"));
  const int r = s.tp_rank;
  switch (s.tp) {
    case TpSplit::Rows: return full.narrow(0, r * s.shape[0], s.shape[0]);
    case TpSplit::Cols: return full.narrow(1, r * s.shape[1], s.shape[1]);
    case TpSplit::QkvRows: {  // (3A, ...) -> (3, A, ...): the rank's heads of each of Q, K, V
      const std::int64_t a = s.shape[0] / 3;
      return full.view({3, full.size(0) / 3, -1}).narrow(1, r * a, a);
    }
    case TpSplit::Vocab: {
      const auto [b, e] = vocab_range(full.size(0), r, s.tp_size);
      return full.narrow(0, b, e - b);
    }
    case TpSplit::None: break;
  }
  return full;
}

}  // namespace

torch::Tensor tp_slice(const ParamSpec& s, const torch::Tensor& full) {
  if (s.tp == TpSplit::None) return full;
  return tp_block(s, full).reshape(s.shape).contiguous();
}

void tp_place(const ParamSpec& s, torch::Tensor& full, const torch::Tensor& block) {
  SB_CHECK(block.numel() == s.numel(), "{}: a tp block of {} elements to place, the spec has {}",
           s.name, block.numel(), s.numel());
  if (s.tp == TpSplit::None) {
    full.copy_(block.reshape(full.sizes()));
    return;
  }
  torch::Tensor dst = tp_block(s, full);
  dst.copy_(block.reshape(s.tp == TpSplit::QkvRows ? dst.sizes() : c10::IntArrayRef(s.shape)));
}

}  // namespace sb::models
