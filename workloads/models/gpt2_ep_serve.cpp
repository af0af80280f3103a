// GPT-2 MoE served under expert parallelism (ep_inference.h serve_expert_parallel): the KV-
// cached prefill and decode steps of forward_rows, each rank computing its share of the
// step's rows through ep inference's blocks (gpt2_ep_inference.cpp ep_block).
#include "harness/core/check.h"
#include "workloads/models/gpt2.h"

namespace sb::models {

void Gpt2::serve_expert_parallel(EpForm form) {
  check_ep_form("expert-parallel serving", form);
  ep_serve_ = form;
}

std::vector<EpLayerStats> Gpt2::take_ep_serve_stats(std::int64_t* steps) {
  if (steps) *steps = ep_serve_steps_;
  ep_serve_steps_ = 0;
  return std::exchange(ep_serve_sum_, {});
}

torch::Tensor Gpt2::ep_cached_attention(ParamProvider& p, const TokenRows& held, const torch::Tensor& q,
                                        KVCache& cache, std::int64_t l, std::int64_t first_row, std::int64_t T,
                                        const torch::Tensor& past, bool prefill) {
  const std::int64_t H = cfg_.n_head, Dh = cfg_.dh();
  const auto b = held.id.div(T, "floor"), t = held.id.remainder(T);
  const auto rows = std::get<0>(at::_unique(b));  // sorted: the step's rows this rank holds a token of
  const auto slot = torch::searchsorted(rows, b);
  const std::int64_t n = rows.size(0);
  if (n == 0) return torch::zeros({0, H * Dh}, q.options());  // a rank with no rows this step
  // The held queries in their rows, the rest zero (a query row sees only its own keys).
  auto qs = torch::zeros({n, T, H, Dh}, q.options());
  qs.index_put_({slot, t}, q.reshape({-1, H, Dh}));
  const std::int64_t Tk = prefill ? T : past.max().item<std::int64_t>() + 1;
  // The rows' keys and values: a view where they are consecutive (dispatch_combine's share),
  // else a copy of those rows.
  const bool consecutive = rows[n - 1].item<std::int64_t>() - rows[0].item<std::int64_t>() == n - 1;
  const auto take = [&](const torch::Tensor& c) {
    return (consecutive ? c.narrow(0, first_row + rows[0].item<std::int64_t>(), n) : c.index_select(0, rows + first_row))
        .narrow(2, 0, Tk);
  };
  AttentionMask m;
  if (prefill) m.causal = true;
  else m.key_keep = torch::arange(Tk, past.options()).unsqueeze(0) <= past.index_select(0, rows).unsqueeze(1);
  const auto o = attend(*attn_, p, qs.transpose(1, 2), take(cache.k[l]), take(cache.v[l]), m, false);
  return o.transpose(1, 2).index({slot, t}).reshape({-1, H * Dh});  // (held, A)
}

torch::Tensor Gpt2::ep_forward_rows(ParamProvider& p, const torch::Tensor& ids, KVCache& cache,
                                    std::int64_t first_row, const std::vector<std::int64_t>& past,
                                    const std::vector<std::int64_t>& last) {
  const EpForm form = *ep_serve_;
  const std::int64_t B = ids.size(0), T = ids.size(1), H = cfg_.n_head, Dh = cfg_.dh(), A = H * Dh;
  // One value of the three (B, T < 2^20, first_row < 2^23): equal on every rank iff its max and
  // min are. Both maxes run on every rank whatever its values (a collective skipped hangs).
  const bool fits = B < (1 << 20) && T < (1 << 20) && first_row < (1 << 23);
  const std::int64_t step = fits ? (B | T << 20 | first_row << 40) : -1;
  const bool highest = ep_.max(step) == step, lowest = ep_.max(-step) == -step;
  SB_CHECK(fits && highest && lowest,
           "expert-parallel serving: every rank of the ep group must run the same step (this ep rank {}: rows "
           "[{}, {}) x T {})", ep_.rank, first_row, first_row + B, T);
  const bool prefill = std::all_of(past.begin(), past.end(), [](auto n) { return n == 0; });
  // This rank's share of the rows; a token's id is its row x T + its column, so a rank's
  // tokens are ids [rank BT, rank BT + n T) and id / BT is its home (ep_moe_layer's rule).
  // A share's routing group is sized S T tokens for capacity on every rank (keep_at_expert),
  // the last share's too when it holds fewer rows.
  const std::int64_t S = (B + ep_.size - 1) / ep_.size, BT = S * T;
  const std::int64_t r0 = std::min(B, ep_.rank * S), n = std::min(B, r0 + S) - r0;
  // Row blocks (ep_inference.h row_blocks) of the share's tokens, rounded up to a power of two
  // between 8 and kRowBlock: the same on every rank and in both forms (bitwise equal), and a
  // decode step's few tokens a rank are not padded to 64 rows (8x the work of 8 rows).
  ep_block_ = 8;
  while (ep_block_ < std::min(BT, kRowBlock)) ep_block_ *= 2;
  const auto lopt = ids.options().dtype(torch::kLong);
  const auto past_t = torch::tensor(past, torch::kLong).to(ids.device());  // (B)
  const auto pos = past_t.narrow(0, r0, n).unsqueeze(1) + torch::arange(T, lopt);
  TokenRows held;
  held.x = embed(p, ids.narrow(0, r0, n), pos).view({n * T, cfg_.d_model});
  held.id = r0 * T + torch::arange(n * T, lopt);
  held.expert = torch::full({n * T}, -1, lopt);
  held.gate = torch::zeros({n * T}, lopt.dtype(torch::kFloat64));
  // Where each new key and value goes in a layer's cache viewed as (rows H cap, Dh): row
  // first_row + b, head h, position past[b] + t.
  const std::int64_t cap = cache.max_len;
  const auto step_rows = torch::arange(first_row, first_row + B, lopt);
  const auto slot = ((step_rows.view({B, 1, 1}) * H + torch::arange(H, lopt).view({1, H, 1})) * cap +
                     past_t.view({B, 1, 1}) + torch::arange(T, lopt).view({1, 1, T})).reshape({-1});  // (B H T)
  // Each block's attention: every token's new key and value into every rank's cache (the
  // context), then the held tokens' queries against their rows.
  const EpAttention attention = [&](std::int64_t l, const TokenRows& h, const torch::Tensor& qkv) {
    TokenRows kv = h;
    kv.x = qkv.narrow(1, A, 2 * A);
    const TokenRows all = gather_rows(ep_, kv, "ep_context");
    SB_CHECK(all.size() == B * T && all.id.equal(torch::arange(B * T, lopt)),
             "expert-parallel serving: the gathered context is {} tokens, not the step's {} x {}", all.size(), B, T);
    const auto kvs = all.x.view({B, T, 2, H, Dh}).permute({2, 0, 3, 1, 4});  // (2, B, H, T, Dh)
    cache.k[l].view({-1, Dh}).index_copy_(0, slot, kvs[0].reshape({-1, Dh}));
    cache.v[l].view({-1, Dh}).index_copy_(0, slot, kvs[1].reshape({-1, Dh}));
    return ep_cached_attention(p, h, qkv.narrow(1, 0, A), cache, l, first_row, T, past_t, prefill);
  };
  std::vector<EpLayerStats> layers;
  for (std::int64_t l = 0; l < cfg_.n_layer; ++l) held = ep_block(p, l, std::move(held), BT, form, attention, layers);
  // Each row's token at last[b], wherever it is, through the LM head; every rank gets them all.
  const auto b = held.id.div(T, "floor");
  const auto at_last = (held.id.remainder(T) == torch::tensor(last, torch::kLong).to(ids.device()).index_select(0, b))
                           .nonzero().squeeze(1);
  TokenRows out = held.select(at_last);
  {  // head() on row blocks: a row's logits do not depend on which rows share its GEMM
    const auto x = final_norm(p, out.x);
    const auto wte = p.acquire(0)[0];
    out.x = row_blocks([&](const torch::Tensor& r) { return p.linear(0, 0, r, wte, torch::Tensor()); }, x, ep_block_);
    p.release(0, out.x);
    p.release(static_cast<int>(cfg_.n_layer + 1), out.x);
  }
  out.id = b.index_select(0, at_last);
  const TokenRows logits = gather_rows(ep_, out, "ep_logits");
  SB_CHECK(logits.size() == B, "expert-parallel serving: {} of the step's {} rows have logits", logits.size(), B);
  // Per layer, summed over steps (serve's series).
  if (ep_serve_sum_.empty()) ep_serve_sum_.resize(layers.size());
  for (std::size_t i = 0; i < layers.size(); ++i) ep_serve_sum_[i] += layers[i];
  ++ep_serve_steps_;
  return logits.x;
}

}  // namespace sb::models
