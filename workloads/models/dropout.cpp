// Mesh-independent dropout masks (dropout.h). The hash works on 32-bit lanes held in int64
// tensors, and multiplies 16-bit halves, so no product overflows int64 (signed overflow would
// be undefined in the kernels): a murmur3 finalizer per lane.
#include "workloads/models/dropout.h"

#include <ATen/ops/bitwise_left_shift.h>
#include <ATen/ops/bitwise_right_shift.h>

#include "harness/core/check.h"
#include "workloads/models/model.h"

namespace sb::models {
namespace {

constexpr std::int64_t kM32 = 0xFFFFFFFFll;

std::uint64_t splitmix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

torch::Tensor shr(const torch::Tensor& t, std::int64_t n) { return at::bitwise_right_shift(t, n); }
torch::Tensor shl(const torch::Tensor& t, std::int64_t n) { return at::bitwise_left_shift(t, n); }

// (h x c) mod 2^32 for h, c < 2^32, from 16-bit halves of h (products below 2^48).
torch::Tensor mul32(const torch::Tensor& h, std::int64_t c) {
  auto lo = (h & 0xFFFF) * c;
  auto hi = (shr(h, 16) * c) & 0xFFFF;
  return (lo + shl(hi, 16)) & kM32;
}

torch::Tensor fmix32(torch::Tensor h) {
  h = h ^ shr(h, 16);
  h = mul32(h, 0x85EBCA6Bll);
  h = h ^ shr(h, 13);
  h = mul32(h, 0xC2B2AE35ll);
  return h ^ shr(h, 16);
}

}  // namespace

std::uint64_t dropout_key(std::uint64_t seed, std::int64_t step) {
  return splitmix(seed ^ splitmix(static_cast<std::uint64_t>(step) + 0x5851F42D4C957F2Dull));
}

torch::Tensor dropout_keep(std::uint64_t key, std::int64_t site, const torch::Tensor& token,
                           std::int64_t features, double p, std::int64_t stride) {
  const std::uint64_t s = splitmix(key ^ splitmix(static_cast<std::uint64_t>(site)));
  const auto s1 = static_cast<std::int64_t>(s & 0xFFFFFFFFull), s2 = static_cast<std::int64_t>(s >> 32);
  const auto opt = torch::TensorOptions().dtype(torch::kLong).device(token.device());
  // e = g F + j, at most 2^62 for any batch here; hashed as two 32-bit lanes.
  const auto e = token.to(torch::kLong).unsqueeze(1) * (stride < 0 ? features : stride) +
                 torch::arange(features, opt).unsqueeze(0);
  const auto h1 = fmix32((e & kM32) ^ s1);
  const auto h2 = fmix32((shr(e, 32) & kM32) ^ h1 ^ s2);
  // 24 bits of h2: u in [0, 1) on a grid of 2^-24; kept iff u >= p.
  const auto threshold = static_cast<std::int64_t>(p * 16777216.0);
  return shr(h2, 8) >= threshold;
}

torch::Tensor DropoutRows::apply(const torch::Tensor& x, std::int64_t site) const {
  if (!on()) return x;
  SB_CHECK(x.dim() == 2 && x.size(0) == token.size(0), "dropout on {} rows, {} tokens given",
           x.size(0), token.size(0));
  const auto keep = dropout_keep(key, site, token, x.size(1), p);
  return x * (keep.to(x.scalar_type()) * static_cast<float>(1.0 / (1.0 - p)));
}

torch::Tensor AttentionDropout::apply(const torch::Tensor& probs, std::int64_t q_begin,
                                      std::int64_t tq, std::int64_t tk) const {
  if (!on()) return probs;
  const std::int64_t B = probs.size(0), H = probs.size(1), n = probs.size(2), nk = probs.size(3);
  SB_CHECK(row_head.size(0) == B && row_head.size(1) == H, "attention dropout for ({}, {}) "
           "rows and heads, the probabilities have ({}, {})", row_head.size(0), row_head.size(1), B, H);
  const auto opt = torch::TensorOptions().dtype(torch::kLong).device(probs.device());
  const auto token = (row_head.unsqueeze(-1) * tq + q_begin + torch::arange(n, opt)).reshape({-1});
  const auto keep = dropout_keep(key, site, token, nk, p, tk).view({B, H, n, nk});
  return probs * (keep.to(probs.scalar_type()) * static_cast<float>(1.0 / (1.0 - p)));
}

AttentionDropout attention_dropout(double p, std::uint64_t seed, const Batch& b,
                                   std::int64_t n_head, std::int64_t head0, std::int64_t heads) {
  AttentionDropout d;
  if (p <= 0 || b.dropout_step < 0) return d;
  SB_CHECK(p < 1, "attention_dropout = {} must be below 1", p);
  const std::int64_t B = b.input_ids.size(0);
  const auto opt = torch::TensorOptions().dtype(torch::kLong).device(b.input_ids.device());
  d.p = p;
  d.key = dropout_key(seed, b.dropout_step);
  d.row_head = (torch::arange(b.row0, b.row0 + B, opt).unsqueeze(1) * n_head + head0 +
                torch::arange(heads, opt).unsqueeze(0));
  return d;
}

DropoutRows dropout_rows(double p, std::uint64_t seed, const Batch& b, std::int64_t first,
                         std::int64_t count) {
  DropoutRows d;
  if (p <= 0 || b.dropout_step < 0) return d;
  SB_CHECK(p < 1, "dropout = {} must be below 1", p);
  const std::int64_t B = b.input_ids.size(0), T = b.input_ids.size(1), full = b.row_tokens();
  d.p = p;
  d.key = dropout_key(seed, b.dropout_step);
  // Token g = row x full + position: a sequence slice (Ulysses) keeps its tokens' numbers.
  const auto opt = torch::TensorOptions().dtype(torch::kLong).device(b.input_ids.device());
  auto token = ((torch::arange(b.row0, b.row0 + B, opt) * full).unsqueeze(1) + b.positions().unsqueeze(0))
                   .reshape({-1});
  d.token = count < 0 ? token : token.narrow(0, first, count);
  return d;
}

void ModelDropout::configure(const DropoutConfig& d, const std::string& preset,
                             bool attention_drops, const std::string& attention) {
  SB_CHECK(d.hidden >= 0 && d.hidden < 1 && d.attention >= 0 && d.attention < 1,
           "model '{}': dropout = {} and attention_dropout = {} must be in [0, 1)", preset,
           d.hidden, d.attention);
  SB_CHECK(d.attention <= 0 || attention_drops, "model '{}': attention_dropout = {} drops "
           "attention probabilities, which the '{}' attention never forms; set attention = naive "
           "or chunked, or attention_dropout = 0", preset, d.attention, attention);
  cfg = d;
}

ModelDropout::Scope ModelDropout::begin(const Batch& b, std::int64_t n_head, int tp_rank,
                                        int tp_size, bool rows_split, int sp_rank, int sp_size) {
  const std::int64_t H = n_head / tp_size, Hs = H / sp_size;
  attn = attention_dropout(cfg.attention, cfg.seed, b, n_head, tp_rank * H + sp_rank * Hs, Hs);
  const std::int64_t R = b.input_ids.numel() / tp_size;
  rows = rows_split ? dropout_rows(cfg.hidden, cfg.seed, b, tp_rank * R, R)
                    : dropout_rows(cfg.hidden, cfg.seed, b);
  return Scope(*this);
}

}  // namespace sb::models
