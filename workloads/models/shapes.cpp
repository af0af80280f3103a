// The GEMMs of a step and the neighbouring shapes (shapes.h).
#include "workloads/models/shapes.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "harness/core/check.h"
#include "workloads/models/family.h"

namespace sb::models {
namespace {

// A linear layer in -> out on M rows, its weight W (out x in): forward x W^T, input gradient
// dY W, weight gradient dY^T x.
void linear(std::vector<Gemm>& g, const std::string& name, std::int64_t M, std::int64_t in,
            std::int64_t out, std::int64_t count) {
  g.push_back({name + " forward", 1, M, in, out, count, false, false, false, true});
  g.push_back({name + " input grad", 1, M, out, in, count, false, true});
  g.push_back({name + " weight grad", 1, out, M, in, count, false, true, true, false});
}

std::int64_t params_of(const ModelConfig& c) { return count_params(make_model(c)->units()); }

std::int64_t round64(double x) { return std::max<std::int64_t>(64, static_cast<std::int64_t>(std::llround(x / 64.0)) * 64); }

}  // namespace

std::vector<Gemm> step_gemms(const ModelConfig& c, std::int64_t B, std::int64_t T, bool naive_attention) {
  SB_CHECK(family(c.family).objective == Objective::CausalLm, "shapes: model '{}' is not GPT-2-like", c.preset);
  const std::int64_t M = B * T, d = c.d_model, A = c.attn_width(), f = c.d_ff, L = c.n_layer;
  const std::int64_t H = c.n_head, dh = c.dh();
  std::vector<Gemm> g;
  linear(g, "attn.c_attn", M, d, 3 * A, L);
  linear(g, "attn.c_proj", M, A, d, L);
  linear(g, "mlp.c_fc", M, d, f, L);
  linear(g, "mlp.c_proj", M, f, d, L);
  // Attention core per (row, head): S = Q K^T (T x dh x T), O = P V (T x T x dh); backward
  // dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q.
  if (naive_attention) {
    g.push_back({"attention Q K^T forward", B * H, T, dh, T, L, false, false, false, true});
    g.push_back({"attention P V forward", B * H, T, T, dh, L});
    g.push_back({"attention dO V^T", B * H, T, dh, T, L, false, true, false, true});
    g.push_back({"attention P^T dO", B * H, T, T, dh, L, false, true, true, false});
    g.push_back({"attention dS K", B * H, T, T, dh, L, false, true});
    g.push_back({"attention dS^T Q", B * H, T, T, dh, L, false, true, true, false});
  }
  linear(g, "lm_head (tied wte)", M, d, c.vocab, 1);
  for (std::size_t i = g.size() - 3; i < g.size(); ++i) g[i].lm_head = true;
  return g;
}

std::string VectorKernel::key() const {
  return fmt::format("{}|{}|{}|{}|{}", op, batch, heads, rows, width) + (classes ? fmt::format("|{}", classes) : "") +
         (backward ? "" : "|fwd");
}

std::vector<VectorKernel> step_vector_kernels(const ModelConfig& c, std::int64_t B, std::int64_t T,
                                              std::int64_t params, bool naive_attention, bool low_precision,
                                              bool training) {
  const std::int64_t M = B * T, d = c.d_model, A = c.attn_width(), f = c.d_ff, L = c.n_layer;
  std::vector<VectorKernel> k;
  if (!training) {
    k.push_back({"layer norms", "layernorm", 1, 1, M, d, 2 * L + 1, 0, false});
    k.push_back({"mlp GELU", "gelu", 1, 1, M, f, L, 0, false});
    if (naive_attention)
      k.push_back({"attention softmax (causal)", "softmax_causal", B * c.n_head, 1, T, T, L, 0, false});
    else
      k.push_back({"attention (fused, causal)", "sdpa", B, c.n_head, T, c.dh(), L, 0, false});
    k.push_back({"residual adds", "add", 1, 1, M, d, 2 * L});
    return k;
  }
  k.push_back({"layer norms", "layernorm", 1, 1, M, d, 2 * L + 1});
  k.push_back({"mlp GELU", "gelu", 1, 1, M, f, L});
  if (naive_attention)
    k.push_back({"attention softmax (causal)", "softmax_causal", B * c.n_head, 1, T, T, L});
  else
    k.push_back({"attention (fused, causal)", "sdpa", B, c.n_head, T, c.dh(), L});
  k.push_back({"lm_head and its cross-entropy", "lm_head", 1, 1, M, d, 1, c.vocab});
  k.push_back({"residual adds", "add", 1, 1, M, d, 2 * L});
  k.push_back({"attn.c_attn bias grad", "sum_rows", 1, 1, M, 3 * A, L});
  k.push_back({"attn.c_proj, mlp.c_proj bias grads", "sum_rows", 1, 1, M, d, 2 * L});
  k.push_back({"mlp.c_fc bias grad", "sum_rows", 1, 1, M, f, L});
  const double per_param = static_cast<double>(params) / static_cast<double>(kStreamedElements);
  k.push_back({"AdamW update", "adamw", 1, 1, 1, kStreamedElements, 1, 0, true, per_param});
  k.push_back({"gradient norm", "norm", 1, 1, 1, kStreamedElements, 1, 0, true, per_param});
  if (low_precision)
    k.push_back({"weight and gradient casts", "cast", 1, 1, 1, kStreamedElements, 1, 0, true, per_param});
  return k;
}

std::vector<ShapeCandidate> neighbour_shapes(const ModelConfig& c, double tolerance) {
  SB_CHECK(!c.moe.on(), "shapes: model '{}' is a mixture of experts; the advisor covers dense GPT-2", c.preset);
  const std::int64_t P = params_of(c);
  std::vector<ShapeCandidate> out = {{c, P, "the model itself"}};
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> seen = {
      {c.d_model, c.n_head, c.d_ff, c.vocab}};
  const std::int64_t d0 = c.d_model / 64 * 64;
  for (std::int64_t d = std::max<std::int64_t>(64, d0 - 256); d <= d0 + 256; d += 64) {
    std::set<std::int64_t> heads;
    for (const std::int64_t dh : {64, 128})
      if (d % dh == 0) heads.insert(d / dh);
    if (d % c.n_head == 0) heads.insert(c.n_head);
    for (const std::int64_t h : heads)
      for (const std::int64_t v : {c.vocab, (c.vocab + 63) / 64 * 64, (c.vocab + 127) / 128 * 128}) {
        ModelConfig t = c;
        t.d_model = d, t.n_head = h, t.head_dim = 0, t.vocab = v;
        // The parameter count is linear in d_ff: two points give the width that keeps it.
        t.d_ff = 64;
        const double p64 = static_cast<double>(params_of(t));
        t.d_ff = 128;
        const double slope = (static_cast<double>(params_of(t)) - p64) / 64.0;
        t.d_ff = round64(64.0 + (static_cast<double>(P) - p64) / slope);
        // The MLP stays 3 to 5 times d wide: a GPT-2 block, not a trade of MLP for attention.
        if (t.d_ff < 3 * d || t.d_ff > 5 * d || !seen.insert({t.d_model, t.n_head, t.d_ff, t.vocab}).second) continue;
        const std::int64_t n = params_of(t);
        if (std::abs(static_cast<double>(n - P)) > tolerance * static_cast<double>(P)) continue;
        std::string change;
        const auto add = [&](const char* what, std::int64_t a, std::int64_t b) {
          if (a != b) change += fmt::format("{}{} {} -> {}", change.empty() ? "" : ", ", what, a, b);
        };
        add("d", c.d_model, d), add("heads", c.n_head, h), add("head size", c.dh(), t.dh());
        add("d_ff", c.d_ff, t.d_ff), add("vocab", c.vocab, v);
        out.push_back({t, n, change});
      }
  }
  return out;
}

std::string tiling_notes(const ModelConfig& c) {
  std::string s;
  const auto note = [&](const char* what, std::int64_t v) {
    if (v % 64) s += fmt::format("{}{} {} % 64 = {}", s.empty() ? "" : "; ", what, v, v % 64);
  };
  note("d", c.d_model), note("head size", c.dh()), note("d_ff", c.d_ff), note("vocab", c.vocab);
  return s;
}

}  // namespace sb::models
