// GPT-2 MoE's expert-parallel inference in ExFlow's two forms (gpt2.h ep_inference,
// ep_inference.h): the same block as Gpt2::block, on the rows of the tokens a rank holds.
#include "harness/core/check.h"
#include "workloads/models/checkpoint.h"
#include "workloads/models/gpt2.h"
#include "workloads/models/gpt2_layout.h"

namespace sb::models {
using namespace gpt2_layout;

namespace {

torch::Tensor norm(const ModelConfig& c, const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return at::layer_norm(x, {c.d_model}, w, b, c.ln_eps);
}

AttentionMask causal() {
  AttentionMask m;
  m.causal = true;
  return m;
}

}  // namespace

torch::Tensor Gpt2::ep_attention_home(const torch::Tensor& qkv, std::int64_t B, std::int64_t T, ParamProvider& p) {
  const std::int64_t H = cfg_.n_head, Dh = cfg_.dh();
  const auto qkv3 = qkv.view({B, T, 3, H, Dh}).unbind(2);
  // Contiguous (B, T, H, Dh), the layout the scattered form builds: one layout into the kernel.
  const auto q = qkv3[0].contiguous().transpose(1, 2), k = qkv3[1].contiguous().transpose(1, 2),
             v = qkv3[2].contiguous().transpose(1, 2);
  return attend(*attn_, p, q, k, v, causal(), false).transpose(1, 2).reshape({B * T, H * Dh});
}

torch::Tensor Gpt2::ep_attention_scattered(const TokenRows& held, const torch::Tensor& qkv, std::int64_t T,
                                           ParamProvider& p) {
  const std::int64_t H = cfg_.n_head, Dh = cfg_.dh(), A = H * Dh;
  // The context: the keys and values of every token of the group on every rank.
  TokenRows kv = held;
  kv.x = qkv.narrow(1, A, 2 * A);
  const TokenRows all = gather_rows(ep_, kv, "ep_context");
  const std::int64_t S = all.size() / T;
  SB_CHECK(S * T == all.size() && all.id.equal(torch::arange(S * T, all.id.options())),
           "expert-parallel inference: the gathered context is not every token of {} sequences of {}", S, T);
  const auto kvs = all.x.view({S, T, 2, H, Dh});
  // The held queries in their sequences' rows, the rest zero (a query row sees only itself).
  const auto seq = held.id.div(T, "floor"), t = held.id.remainder(T);
  const auto present = std::get<0>(at::_unique(seq));  // sorted
  const auto slot = torch::searchsorted(present, seq);
  auto q = torch::zeros({present.size(0), T, H, Dh}, qkv.options());
  q.index_put_({slot, t}, qkv.narrow(1, 0, A).reshape({-1, H, Dh}));
  const auto k = kvs.select(2, 0).index_select(0, present).contiguous();
  const auto v = kvs.select(2, 1).index_select(0, present).contiguous();
  const auto o = attend(*attn_, p, q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal(), false);
  return o.transpose(1, 2).index({slot, t}).reshape({-1, A});  // (n, A): the held rows
}

TokenRows Gpt2::ep_moe_layer(ParamProvider& p, std::int64_t l, TokenRows held, const std::vector<torch::Tensor>& w,
                             std::int64_t BT, EpForm form, EpLayerStats& st) {
  const MoeConfig& c = cfg_.moe;
  const std::int64_t El = c.experts / ep_.size, k = c.top_k;
  // The router as moe_mlp runs it (fp32 at least), on row blocks.
  const auto h = norm(cfg_, held.x, w[kLn2W], w[kLn2B]);
  const auto rt = at::promote_types(h.scalar_type(), torch::kFloat32);
  const auto router = w[kRouterW].to(rt);
  const auto probs = torch::softmax(row_blocks([&](const torch::Tensor& r) { return torch::matmul(r.to(rt), router.t()); }, h, ep_block_), -1);
  const auto top = probs.topk(k, -1);
  // A token's k assignments in increasing expert order (the order the ordinary forward adds
  // their outputs in, experts_local), each with its router probability (capacity ranks by it)
  // and its weight (top-2: the two renormalized, as moe_mlp's gates).
  const auto sorted = std::get<1>(top).sort(1);
  const auto& by_expert = std::get<0>(sorted);
  const auto& order = std::get<1>(sorted);
  const auto score = std::get<0>(top).gather(1, order);
  const auto weight = k > 1 ? score / score.sum(1, true) : score;
  // The assignments as rows: token i's j-th has id i k + j, so ids stay unique and in token order.
  TokenRows a;
  a.x = k == 1 ? held.x : held.x.repeat_interleave(k, 0);
  a.id = (held.id.unsqueeze(1) * k + torch::arange(k, held.id.options())).reshape({-1});
  a.expert = by_expert.reshape({-1});
  a.gate = score.reshape({-1}).to(torch::kFloat64);
  const std::size_t m = static_cast<std::size_t>(l / c.every);  // the m-th MoE layer
  const auto dest = expert_ranks(ep_, m, c.experts).to(a.expert.device()).index_select(0, a.expert);
  st.layer = l;
  st.tokens = a.size();
  st.routed = torch::stack({a.id.div(k, "floor"), a.expert}, 1);
  st.cross_rank = (dest != ep_.rank).sum().item<std::int64_t>();
  TokenRows arrived = exchange_rows(ep_, a, dest, form == EpForm::Coherent ? "ep_route" : "ep_dispatch", &st);
  st.received = arrived.size();
  const auto keep = keep_at_expert(c, arrived, BT, k);
  st.dropped = st.received - keep.sum().item<std::int64_t>();
  // This rank's experts on their kept arrivals (the same rows, in id order, in both forms).
  const int eu = experts_unit(l);
  const auto e = p.acquire(eu);
  const auto h2 = norm(cfg_, arrived.x, w[kLn2W], w[kLn2B]);
  auto y = torch::zeros_like(arrived.x);
  const auto mine = local_experts(ep_, m, c.experts, ep_.rank);  // e[.][j] is expert mine[j]
  SB_CHECK(static_cast<std::int64_t>(mine.size()) == El && e[kExpFcW].size(0) == El,
           "expert-parallel inference: {} experts placed on rank {}, {} in its weights, {} expected",
           mine.size(), ep_.rank, e[kExpFcW].size(0), El);
  for (std::int64_t j = 0; j < El; ++j) {
    const auto rows = ((arrived.expert == mine[static_cast<std::size_t>(j)]) & keep).nonzero().squeeze(1);
    if (rows.size(0) == 0) continue;
    const auto hid = at::gelu(at::linear(h2.index_select(0, rows), e[kExpFcW][j], e[kExpFcB][j]), "tanh");
    y.index_copy_(0, rows, at::linear(hid, e[kExpProjW][j], e[kExpProjB][j]));
  }
  if (form == EpForm::Coherent) {  // the token stays with the expert that processed it
    arrived.x = arrived.x + y * arrived.gate.to(y.scalar_type()).unsqueeze(1);  // a dropped one passes through
    p.release(eu, arrived.x);
    return arrived;
  }
  // dispatch_combine: the kept assignments' outputs go home, where the token's hidden state
  // stayed; there each is weighted and added to the residual (a dropped assignment adds 0).
  const auto kept = keep.nonzero().squeeze(1);
  const TokenRows out{y.index_select(0, kept), arrived.id.index_select(0, kept),
                      arrived.expert.index_select(0, kept), arrived.gate.index_select(0, kept)};
  p.release(eu, out.x);
  const auto home = out.id.div(BT * k, "floor");
  st.returned = (home != ep_.rank).sum().item<std::int64_t>();
  const TokenRows back = exchange_rows(ep_, out, home, "ep_combine", &st);
  const auto local = back.id - ep_.rank * BT * k;  // the assignment's index on this rank
  const auto wt = weight.reshape({-1}).index_select(0, local).to(held.x.scalar_type()).unsqueeze(1);
  held.x = held.x + torch::zeros_like(held.x).index_add(0, local.div(k, "floor"), back.x * wt);
  return held;
}

void Gpt2::check_ep_form(const char* what, EpForm form) const {
  check_whole(what);
  pp_.check_uncut(cfg_.preset, what);
  SB_CHECK(cfg_.moe.on() && ep_.on() && ep_.exchange && ep_.gather, "model '{}': {} needs a mixture of "
           "experts split over mesh.ep > 1", cfg_.preset, what);
  SB_CHECK(cfg_.moe.top_k == 1 || form == EpForm::DispatchCombine, "model '{}': the context-coherent form "
           "keeps a token on its one expert's rank, so it routes top-1; moe.top_k = {} runs moe.ep_form = "
           "dispatch_combine (two all-to-alls a layer)", cfg_.preset, cfg_.moe.top_k);
}

TokenRows Gpt2::ep_block(ParamProvider& p, std::int64_t l, TokenRows held, std::int64_t BT, EpForm form,
                         const EpAttention& attention, std::vector<EpLayerStats>& layers) {
  const int u = static_cast<int>(l + 1);
  const auto w = p.acquire(u);
  const auto linear = [&](int i) {
    return [&p, &w, u, i](const torch::Tensor& r) { return p.linear(u, i, r, w[i], w[i + 1]); };
  };
  const auto qkv = row_blocks(linear(kAttnW), norm(cfg_, held.x, w[kLn1W], w[kLn1B]), ep_block_);
  held.x = held.x + row_blocks(linear(kProjW), attention(l, held, qkv), ep_block_);
  if (cfg_.moe.layer(l)) {
    EpLayerStats st;
    held = ep_moe_layer(p, l, std::move(held), w, BT, form, st);
    layers.push_back(std::move(st));
  } else {
    const auto mlp = row_blocks([&](const torch::Tensor& r) {
      return p.linear_gelu(u, kFcW, r, w[kFcW], w[kFcB], "tanh");
    }, norm(cfg_, held.x, w[kLn2W], w[kLn2B]), ep_block_);
    held.x = held.x + row_blocks(linear(kMlpW), mlp, ep_block_);
  }
  p.release(u, held.x);
  return held;
}

EpInference Gpt2::ep_inference(ParamProvider& p, const torch::Tensor& ids, EpForm form) {
  torch::NoGradGuard ng;
  check_ep_form("expert-parallel inference", form);
  SB_CHECK(ids.dim() == 2, "GPT-2 input_ids must be (B, T), got {} dims", ids.dim());
  const std::int64_t B = ids.size(0), T = ids.size(1), BT = B * T;
  SB_CHECK(T <= cfg_.max_pos, "model '{}': sequence of {} tokens exceeds its {} positions", cfg_.preset, T,
           cfg_.max_pos);
  SB_CHECK(ep_.max(B) == B && ep_.max(-B) == -B && ep_.max(T) == T && ep_.max(-T) == -T,
           "expert-parallel inference: every rank of the ep group must run the same batch and sequence "
           "length (this ep rank {}: B {} x T {})", ep_.rank, B, T);
  const auto lopt = ids.options().dtype(torch::kLong);
  ep_block_ = kRowBlock;
  TokenRows held;
  held.x = embed(p, ids, torch::arange(T, lopt));
  held.id = ep_.rank * BT + torch::arange(BT, lopt);
  held.expert = torch::full({BT}, -1, lopt);
  held.gate = torch::zeros({BT}, lopt.dtype(torch::kFloat64));
  EpInference out;
  bool home = true;  // tokens in their sequences' ranks, in order
  const EpAttention attention = [&](std::int64_t, const TokenRows& h, const torch::Tensor& qkv) {
    return home ? ep_attention_home(qkv, B, T, p) : ep_attention_scattered(h, qkv, T, p);
  };
  for (std::int64_t l = 0; l < cfg_.n_layer; ++l) {
    held = ep_block(p, l, std::move(held), BT, form, attention, out.layers);
    if (cfg_.moe.layer(l)) home = form == EpForm::DispatchCombine;
  }
  if (!home) held = exchange_rows(ep_, held, held.id.div(BT, "floor"), "ep_home");
  SB_CHECK(held.size() == BT, "expert-parallel inference: {} of this rank's {} tokens came home", held.size(), BT);
  out.logits = head(p, held.x, true).view({B, T, cfg_.vocab});
  return out;
}

}  // namespace sb::models
