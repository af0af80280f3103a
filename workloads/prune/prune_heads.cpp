// "heads": structured pruning of attention heads. In every block, head h is rows
// [h Dh, (h+1) Dh) of the query, key and value projections (with their biases) and the same
// columns of the output projection; it is removed whole, so the result is a smaller dense
// model (n_head' = n_head - round(sparsity x n_head) in every block, head_dim unchanged: the
// attention width n_head' x head_dim falls below d_model). Importance of head h
// (pruning.importance): magnitude ||W_o[:, h]||_F x sqrt(||W_v[h]||_F^2 + ||b_v[h]||^2) (the
// output projection of a head and the value path it carries), or taylor |sum of w x dL/dw over
// its q, k, v rows and biases and its output columns|. A head whose output columns are zero
// contributes nothing and goes first under magnitude (tests/unit/prune_models.cpp builds one).
#include <cmath>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/family.h"
#include "workloads/prune/pruner.h"

namespace sb::prune {
namespace {

// Where a block keeps its attention: GPT-2 fuses q, k, v into attn.c_attn (3A rows); BERT has
// attention.self.{query,key,value}. The output projection's columns are the heads'.
struct AttnParams {
  int qkv_w = -1, qkv_b = -1;             // GPT-2
  int w[3] = {-1, -1, -1}, b[3] = {-1, -1, -1};  // BERT: query, key, value
  int out_w = -1;
};

AttnParams attn_params(const models::UnitSpec& u) {
  AttnParams a;
  const char* qkv[3] = {"query", "key", "value"};
  for (int i = 0; i < static_cast<int>(u.params.size()); ++i) {
    const std::string& n = u.params[i].name;
    using models::ends_with;
    if (ends_with(n, "attn.c_attn.weight")) a.qkv_w = i;
    if (ends_with(n, "attn.c_attn.bias")) a.qkv_b = i;
    if (ends_with(n, "attn.c_proj.weight") || ends_with(n, "attention.output.dense.weight")) a.out_w = i;
    for (int k = 0; k < 3; ++k) {
      if (ends_with(n, std::string("attention.self.") + qkv[k] + ".weight")) a.w[k] = i;
      if (ends_with(n, std::string("attention.self.") + qkv[k] + ".bias")) a.b[k] = i;
    }
  }
  return a;
}

// Rows of `keep` heads (each Dh rows) of a (H Dh, ...) tensor.
torch::Tensor head_rows(const torch::Tensor& t, const torch::Tensor& keep, std::int64_t Dh) {
  auto v = t.view({-1, Dh, t.dim() == 2 ? t.size(1) : 1});  // (H, Dh, in|1)
  return v.index_select(0, keep).reshape(t.dim() == 2 ? std::vector<std::int64_t>{-1, t.size(1)}
                                                      : std::vector<std::int64_t>{-1}).contiguous();
}

Pruned heads(const models::Model& model, const models::UnitTensors& weights, const PruneConfig& c) {
  const auto& cfg = model.config();
  const std::int64_t H = cfg.n_head, Dh = cfg.dh(), A = cfg.attn_width();
  const auto& units = model.units();
  auto shrink = [Dh](models::ModelConfig& small, std::int64_t kept) {
    small.n_head = kept;
    small.head_dim = Dh;  // the heads keep their size: the attention width shrinks
  };
  return prune_structured("heads", "heads", model, weights, c.sparsity, H, shrink,
                          [&](std::size_t u, std::vector<torch::Tensor>& dst, std::int64_t kept) {
    const AttnParams a = attn_params(units[u]);
    if (a.out_w < 0) return false;  // not a block
    const bool fused = a.qkv_w >= 0;
    SB_CHECK(fused ? a.qkv_b >= 0 : (a.w[0] >= 0 && a.w[1] >= 0 && a.w[2] >= 0 && a.b[2] >= 0),
             "pruning heads: unit {} has an attention output but not its q, k, v", units[u].name);
    // The value projection per head: (H, Dh x d) and its bias (H, Dh).
    auto wv = fused ? dst[a.qkv_w].narrow(0, 2 * A, A) : dst[a.w[2]];
    auto bv = fused ? dst[a.qkv_b].narrow(0, 2 * A, A) : dst[a.b[2]];
    auto wo = dst[a.out_w];  // (d, A)
    torch::Tensor importance;  // (H)
    if (c.importance == "taylor") {  // |sum of w x g| over the head's q, k, v rows, biases and output columns
      auto per_head = [&](int i) { return (dst[i] * taylor_gradient(c, u, i)).reshape({-1}); };
      importance = (per_head(a.out_w).view({wo.size(0), H, Dh}).sum({0, 2})).clone();
      auto add_rows = [&](const torch::Tensor& wg, std::int64_t off) {  // rows [off, off + A) of q|k|v
        importance += wg.narrow(0, off, A).reshape({H, -1}).sum(1);
      };
      if (fused) {
        auto w = (dst[a.qkv_w] * taylor_gradient(c, u, a.qkv_w)), b = (dst[a.qkv_b] * taylor_gradient(c, u, a.qkv_b));
        for (int k = 0; k < 3; ++k) add_rows(w, k * A), add_rows(b, k * A);
      } else {
        for (int k = 0; k < 3; ++k)
          add_rows(dst[a.w[k]] * taylor_gradient(c, u, a.w[k]), 0), add_rows(dst[a.b[k]] * taylor_gradient(c, u, a.b[k]), 0);
      }
      importance = importance.abs();
    } else {
      importance = wo.view({wo.size(0), H, Dh}).pow(2).sum({0, 2}).sqrt() *
                   (wv.reshape({H, -1}).pow(2).sum(1) + bv.view({H, Dh}).pow(2).sum(1)).sqrt();
    }
    const auto keep = most_important(importance, kept);
    if (fused) {  // q, k, v blocks of c_attn, each its kept heads
      std::vector<torch::Tensor> w3, b3;
      for (int k = 0; k < 3; ++k) {
        w3.push_back(head_rows(dst[a.qkv_w].narrow(0, k * A, A), keep, Dh));
        b3.push_back(head_rows(dst[a.qkv_b].narrow(0, k * A, A), keep, Dh));
      }
      dst[a.qkv_w] = torch::cat(w3, 0);
      dst[a.qkv_b] = torch::cat(b3, 0);
    } else {
      for (int k = 0; k < 3; ++k) {
        dst[a.w[k]] = head_rows(dst[a.w[k]], keep, Dh);
        dst[a.b[k]] = head_rows(dst[a.b[k]], keep, Dh);
      }
    }
    dst[a.out_w] = wo.view({wo.size(0), H, Dh}).index_select(1, keep).reshape({wo.size(0), -1}).contiguous();
    return true;
  });
}

const sb::Registrar kRegister([] {
  register_pruner("heads",
                  "structured: remove the least important attention heads (pruning.sparsity of "
                  "n_head in every block): a smaller dense model",
                  {.prune = heads, .ranks_units = true, .blocks = "attention"});
});

}  // namespace
}  // namespace sb::prune
