// GPT-2 forward (training, evaluation and KV-cached decoding) and generation.
#include "workloads/models/gpt2.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include "harness/core/check.h"
#include "workloads/models/checkpoint.h"
#include "workloads/models/gpt2_layout.h"
#include "workloads/models/loss.h"
#include "workloads/models/stage_provider.h"

namespace sb::models {
using namespace gpt2_layout;
namespace {

ParamSpec normal(std::string name, std::vector<std::int64_t> shape, double std = 0.02) {
  ParamSpec p{std::move(name), std::move(shape)};
  p.std = std;
  p.decay = p.shape.size() >= 2;  // nanoGPT: decay matrices and embeddings, not biases/LN
  return p;
}
ParamSpec fill(std::string name, std::vector<std::int64_t> shape, ParamSpec::Init init) {
  ParamSpec p{std::move(name), std::move(shape)};
  p.init = init;
  p.decay = false;
  return p;
}

// An experts unit's FLOPs per token (moe.h): top_k of the E experts' weights; their biases
// (2-D, stacked) count as vector FLOPs.
TrainFlops experts_flops(const UnitSpec& u, const MoeConfig& m) {
  TrainFlops f;
  const double active = static_cast<double>(m.top_k) / static_cast<double>(m.experts);
  for (std::size_t i = 0; i < u.params.size(); ++i) {
    const bool bias = static_cast<int>(i) == kExpFcB || static_cast<int>(i) == kExpProjB;
    (bias ? f.vector : f.matmul) += 6.0 * static_cast<double>(u.params[i].numel()) * active;
  }
  return f;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Gpt2::Gpt2(ModelConfig cfg) : cfg_(std::move(cfg)) {
  SB_CHECK(cfg_.head_dim > 0 || cfg_.d_model % cfg_.n_head == 0,
           "model '{}': d_model {} is not divisible by n_head {}", cfg_.preset, cfg_.d_model, cfg_.n_head);
  attn_ = make_attention(cfg_.attention, cfg_.attention_options());
  units_ = whole_units_ = make_units(0, 1);
}

std::vector<UnitSpec> Gpt2::make_units(int r, int n) const {
  const std::int64_t d = cfg_.d_model, f = cfg_.d_ff, A = cfg_.attn_width();
  const auto Z = ParamSpec::Init::Zeros, O = ParamSpec::Init::Ones;
  auto tp = [&](ParamSpec s, TpSplit how) { return tp_split(std::move(s), how, r, n); };
  const auto Col = TpSplit::Rows, Row = TpSplit::Cols, Qkv = TpSplit::QkvRows;
  // GPT-2 scales the residual projections' init by 1/sqrt(2L) (two per block).
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg_.n_layer));
  std::vector<UnitSpec> units;
  units.push_back({"embed", {tp(normal("wte.weight", {cfg_.vocab, d}), TpSplit::Vocab),
                             normal("wpe.weight", {cfg_.max_pos, d})}});
  for (std::int64_t i = 0; i < cfg_.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    UnitSpec u{"block." + std::to_string(i),
               {fill(h + "ln_1.weight", {d}, O), fill(h + "ln_1.bias", {d}, Z),
                tp(normal(h + "attn.c_attn.weight", {3 * A, d}), Qkv),
                tp(fill(h + "attn.c_attn.bias", {3 * A}, Z), Qkv),
                tp(normal(h + "attn.c_proj.weight", {d, A}, proj_std), Row),
                fill(h + "attn.c_proj.bias", {d}, Z),
                fill(h + "ln_2.weight", {d}, O), fill(h + "ln_2.bias", {d}, Z)}};
    if (cfg_.moe.layer(i)) {  // moe.h: the router; the experts' unit follows the head
      u.params.push_back(normal(h + "moe.router.weight", {cfg_.moe.experts, d}));
    } else {
      u.params.insert(u.params.end(),
                      {tp(normal(h + "mlp.c_fc.weight", {f, d}), Col), tp(fill(h + "mlp.c_fc.bias", {f}, Z), Col),
                       tp(normal(h + "mlp.c_proj.weight", {d, f}, proj_std), Row),
                       fill(h + "mlp.c_proj.bias", {d}, Z)});
    }
    units.push_back(std::move(u));
  }
  units.push_back({"head", {fill("ln_f.weight", {d}, O), fill("ln_f.bias", {d}, Z)}});
  for (std::int64_t i = 0; i < cfg_.n_layer; ++i) {  // each MoE layer's experts, this ep rank's
    if (!cfg_.moe.layer(i)) continue;
    const std::string h = "h." + std::to_string(i) + ".moe.experts.";
    const std::int64_t E = cfg_.moe.experts;
    const auto ep = [&](ParamSpec s) { return ep_split(std::move(s), ep_.rank, ep_.size); };
    UnitSpec u{"experts." + std::to_string(i),
               {ep(normal(h + "c_fc.weight", {E, f, d})), ep(fill(h + "c_fc.bias", {E, f}, Z)),
                ep(normal(h + "c_proj.weight", {E, d, f}, proj_std)), ep(fill(h + "c_proj.bias", {E, d}, Z))}};
    u.params[kExpFcB].decay = u.params[kExpProjB].decay = false;  // biases, though 2-D
    u.expert = true;
    units.push_back(std::move(u));
  }
  return units;
}

std::string Gpt2::tensor_parallel_problem(int n) const {
  if (cfg_.moe.on() && n > 1)
    return fmt::format("model '{}' (mixture of experts) does not split over mesh.tp yet; set mesh.tp = 1", cfg_.preset);
  return megatron_problem(cfg_, n);
}

void Gpt2::set_tensor_parallel(TensorParallel tp) {
  const std::string why = tensor_parallel_problem(tp.size);
  SB_CHECK(why.empty(), "{}", why);
  check_functions(tp, false);
  units_ = make_units(tp.rank, tp.size);
  tp_ = std::move(tp);
}

std::string Gpt2::sequence_parallel_problem(int size, std::int64_t seq, int tp_size) const {
  // A mixture of experts routes each sp rank's tokens as its own group (MoeConfig::sequence_groups).
  return models::sequence_parallel_problem(cfg_.n_head / std::max(tp_size, 1), seq, size);
}

void Gpt2::set_sequence_parallel(SequenceParallel sp) {
  const std::string why = sequence_parallel_problem(sp.size, 0, tp_.size);
  SB_CHECK(why.empty(), "{}", why);
  SB_CHECK(!sp.on() || !tp_.rows_split(), "model '{}': Ulysses sequence parallelism (mesh.sp = "
           "{}) does not run with Megatron's tp_sequence_parallel yet; set tp_sequence_parallel = "
           "false", cfg_.preset, sp.size);
  SB_CHECK(!sp.on() || sp.all_to_all, "model '{}': sequence parallelism without its all-to-all",
           cfg_.preset);
  sp_ = std::move(sp);
}

std::string Gpt2::pipeline_problem(int stages) const {
  if (cfg_.moe.on() && stages > 1)
    return fmt::format("model '{}' (mixture of experts) does not run over pipeline stages yet; set "
                       "mesh.pp = 1", cfg_.preset);
  return models::pipeline_problem(cfg_.n_layer, stages);
}

void Gpt2::set_pipeline(int pp, int v, int rank, const std::vector<std::int64_t>& stage_layers) {
  // Per row, forward + backward: a block's weights; the LM head's 6 V d on the last stage (the
  // embeddings are lookups). units_: this tp rank's blocks.
  const double head = unit_flops_per_row(whole_units_[static_cast<std::size_t>(cfg_.n_layer + 1)]).total() +
                      6.0 * static_cast<double>(cfg_.vocab * cfg_.d_model);
  units_ = pp_.apply(cfg_.preset, units_, pp, v, rank, unit_flops_per_row(whole_units_[1]).total(),
                     0.0, head, true, stage_layers);
}

std::vector<std::int64_t> Gpt2::stage_activation_shape(const Batch& b) const {
  const std::int64_t rows = b.input_ids.numel();
  return {tp_.rows_split() ? rows / tp_.size : rows, cfg_.d_model};
}

void Gpt2::set_dropout(const DropoutConfig& d) {
  dropout_.configure(d, cfg_.preset, attn_->drops_probabilities(), attn_->name());
}

torch::Tensor Gpt2::stage_forward(ParamProvider& p0, int chunk, const Batch& b, const torch::Tensor& input) {
  SB_CHECK(pp_.cut.on(), "model '{}' is not cut into pipeline stages", cfg_.preset);
  const auto masks = dropout_.begin(b, cfg_.n_head, tp_.rank, tp_.size, tp_.rows_split(), sp_.rank, sp_.size);
  ParamProvider& p = stages_.get(p0, pp_.local);
  const int s = pp_.cut.stage(chunk);
  const std::int64_t B = b.input_ids.size(0), T = b.input_ids.size(1);
  SB_CHECK(b.row_tokens() <= cfg_.max_pos, "model '{}': sequence of {} tokens exceeds its {} "
           "positions", cfg_.preset, b.row_tokens(), cfg_.max_pos);
  torch::Tensor x = pp_.cut.first(chunk) ? embed(p, b.input_ids, b.positions()) : input;
  AttentionMask mask;
  mask.causal = true;
  x = blocks(p, x, B, T, {}, mask, pp_.cut.first_layer[s], pp_.cut.first_layer[s + 1]);
  if (!pp_.cut.last(chunk)) return x;
  SB_CHECK(b.targets.defined(), "GPT-2 loss needs targets (B, T)");
  return lm_loss(p, x, b.targets.reshape({-1}));
}

void Gpt2::check_whole(const char* what) const {
  SB_CHECK(!tp_.on(), "model '{}': {} is not implemented for a tensor-parallel model (mesh.tp = "
           "{}); tensor parallelism runs training's loss only today", cfg_.preset, what, tp_.size);
  SB_CHECK(!sp_.on(), "model '{}': {} is not implemented for a sequence-parallel model (mesh.sp "
           "= {}); sequence parallelism runs training's loss only today", cfg_.preset, what, sp_.size);
}

torch::Tensor Gpt2::row_linear(ParamProvider& p, int u, int w_index, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& b) {
  if (!tp_.on()) return p.linear(u, w_index, x, w, b);
  if (tp_.rows_split()) return tp_.scatter_rows(p.linear(u, w_index, x, w, torch::Tensor())) + tp_.replicated(b);
  return tp_.reduce_from(p.linear(u, w_index, x, w, torch::Tensor())) + b;
}

TrainFlops Gpt2::train_flops(const Batch& b) const {
  // Every position runs the blocks and the tied LM head (logits for all B x T positions, also
  // those without a target); position embeddings are a lookup. Attention: Q K^T and A V, 2 T A
  // each per token and layer forward, x3 with the backward (PaLM, appendix B; A = the attention
  // width, d_model unless heads were pruned); causal masking is not discounted (the naive
  // kernel computes the full square).
  const double tokens = static_cast<double>(b.input_ids.numel()), T = static_cast<double>(b.input_ids.size(1));
  const auto& units = whole_units_;  // the model's FLOPs, whatever this rank's share
  TrainFlops row = unit_flops_per_row(units[static_cast<std::size_t>(cfg_.n_layer + 1)]);  // ln_f
  for (std::int64_t l = 1; l <= cfg_.n_layer; ++l) {
    const auto u = unit_flops_per_row(units[static_cast<std::size_t>(l)]);
    row.matmul += u.matmul, row.vector += u.vector;
    if (!cfg_.moe.layer(l - 1)) continue;
    const auto e = experts_flops(units[static_cast<std::size_t>(experts_unit(l - 1))], cfg_.moe);
    row.matmul += e.matmul, row.vector += e.vector;
  }
  row.matmul += 6.0 * static_cast<double>(units[0].params[0].numel());  // LM head: wte (V, d)
  TrainFlops f;
  f.attention = tokens * 12.0 * static_cast<double>(cfg_.n_layer) * T * static_cast<double>(cfg_.attn_width());
  f.attention_executed = attn_->executed_scores(true) * f.attention;
  f.matmul = tokens * row.matmul + f.attention;
  f.vector = tokens * row.vector;
  f.counted = fmt::format("causal LM: blocks and the tied LM head ({} x {}) on every position; attention "
                          "12 L T A{}", cfg_.vocab, cfg_.d_model,
                          cfg_.moe.on() ? fmt::format("; MoE blocks: the router and {} of {} experts a token",
                                                      cfg_.moe.top_k, cfg_.moe.experts) : "");
  return f;
}

torch::Tensor Gpt2::embed(ParamProvider& p, const torch::Tensor& ids, const torch::Tensor& pos) {
  auto e = p.acquire(0);  // wte (V, d), wpe (P, d)
  torch::Tensor x;
  if (!tp_.on()) {
    x = at::embedding(e[0], ids) + at::embedding(e[1], pos);
  } else {  // this rank's vocabulary rows: tokens outside them give zeros, the sum over tp all
    const std::int64_t begin = vocab_range(cfg_.vocab, tp_.rank, tp_.size).first;
    const auto mine = (ids >= begin) & (ids < begin + e[0].size(0));
    auto local = at::embedding(e[0], torch::where(mine, ids - begin, torch::zeros_like(ids)));
    local = local * mine.unsqueeze(-1).to(local.scalar_type());  // (B, T, d)
    if (!tp_.rows_split()) {
      x = tp_.reduce_from(local) + at::embedding(e[1], pos);
    } else {  // this rank's block of the B*T rows, and their positions
      x = tp_.scatter_rows(local.view({-1, cfg_.d_model}));
      const auto rows = pos.expand(ids.sizes()).reshape({-1}).narrow(0, tp_.rank * x.size(0), x.size(0));
      x = x + at::embedding(tp_.replicated(e[1]), rows);
    }
  }
  x = dropout_.rows.apply(x.view({-1, cfg_.d_model}), embed_site());
  p.release(0, x);
  return x;  // (B*T, d)
}

torch::Tensor Gpt2::blocks(ParamProvider& p, torch::Tensor x, std::int64_t B, std::int64_t T,
                           const KeysValues& kv, const AttentionMask& mask, std::int64_t first,
                           std::int64_t last) {
  // By value: a recomputation in backward (checkpoint.h) must see this forward's masks.
  const DropoutRows rows = dropout_.rows;
  for (std::int64_t l = first; l < (last < 0 ? cfg_.n_layer : last); ++l) {
    const AttentionMask m = with_dropout(mask, dropout_.attn, l);
    if (ac_.chunked() && !kv) {
      x = chunked_block(p, in_chunks(p, l, B, T, m, rows), x);
    } else if (ac_.block(l) && !kv) {
      x = checkpointed(p, [this, &p, l, B, T, m, rows](const std::vector<torch::Tensor>& in) {
        return block(p, l, in[0], B, T, {}, m, rows);
      }, {x});
    } else {
      x = block(p, l, x, B, T, kv, m, rows);
    }
    p.release(static_cast<int>(l + 1), x);
  }
  return x;
}

std::int64_t Gpt2::sequence_stripe(std::int64_t seq) const {
  if (!ac_.chunked() || !sp_.on()) return 0;
  // Each rank's slice in seq_chunks stripes (fewer, of one token, when shorter: in_chunks);
  // one stripe is the contiguous slice (0).
  const std::int64_t local = seq / sp_.size, chunks = std::min(cfg_.seq_chunks, local);
  return chunks > 1 ? local / chunks : 0;
}

ChunkedBlock Gpt2::in_chunks(ParamProvider& p, std::int64_t l, std::int64_t B, std::int64_t T,
                             const AttentionMask& m, const DropoutRows& rows) {
  SB_CHECK(!tp_.rows_split() && !cfg_.moe.on(),
           "model '{}': activation_checkpoint = \"chunked\" runs whole blocks of a dense model on whole "
           "rows; set tp_sequence_parallel = false (or use \"full\")", cfg_.preset);
  SB_CHECK(m.causal && m.q_offset == 0 && !m.segment_ids.defined() && (!sp_.on() || !m.key_keep.defined()),
           "model '{}': activation_checkpoint = \"chunked\" needs causal attention over unpacked, unpadded rows",
           cfg_.preset);
  // Inside Ulysses (sequence_parallel.h) this rank's T tokens are its stripes of the chunks
  // (sequence_stripe): chunk i's all-to-all gathers the sp stripes i, tokens [i sp n, (i + 1)
  // sp n) of the row, so a chunk's sp n queries attend to keys 0 .. (i + 1) sp n.
  const std::int64_t chunks = std::min(cfg_.seq_chunks, T);
  SB_CHECK(!sp_.on() || T % chunks == 0, "model '{}': under mesh.sp = {} each rank's {} tokens split into "
           "seq_chunks = {} equal stripes; make seq / sp a multiple of seq_chunks", cfg_.preset, sp_.size, T,
           chunks);
  // A chunk's probabilities would be keyed by their place in the chunk (dropout.h), not the token's.
  SB_CHECK(!m.dropout.on(), "model '{}': attention_dropout with activation_checkpoint = \"chunked\": the "
           "probabilities' masks would depend on the chunks; set attention_dropout = 0", cfg_.preset);
  ChunkedBlock c;
  // A sequence shorter than seq_chunks (a short evaluation or prompt) runs in chunks of one token.
  c.B = B, c.T = T, c.chunks = chunks, c.kv_offload = cfg_.kv_offload;
  c.dir = cfg_.kv_offload_dir;
  c.kv_scale = sp_.size;
  c.f = [this, &p, l, B, T, m, rows](const torch::Tensor& x, std::int64_t s, std::int64_t n,
                                     const ChunkedBlock::Kv& kv) {
    AttentionMask mc = m;  // queries s.. see keys 0 .. s + their index (x sp: every rank's)
    mc.q_offset = s * sp_.size;
    if (m.key_keep.defined()) mc.key_keep = m.key_keep.narrow(1, 0, s + n);
    DropoutRows rc = rows;  // the chunk's tokens keep their numbers, so their masks
    if (rows.token.defined()) rc.token = rows.token.view({B, T}).narrow(1, s, n).reshape({-1});
    const KeysValues join = [&kv](std::int64_t, const torch::Tensor& k, const torch::Tensor& v) { return kv(k, v); };
    return block(p, l, x, B, n, join, mc, rc);
  };
  return c;
}

torch::Tensor Gpt2::block(ParamProvider& p, std::int64_t l, const torch::Tensor& x_in, std::int64_t B,
                          std::int64_t T, const KeysValues& kv, const AttentionMask& m,
                          const DropoutRows& rows) {
  // Under tp this rank runs H / tp heads and d_ff / tp MLP columns (tensor_parallel.h).
  const std::int64_t d = cfg_.d_model, H = cfg_.n_head / tp_.size, Dh = cfg_.dh();
  // Sequence parallelism: x holds this rank's rows; the column-parallel layers gather them.
  const auto in_tp = [&](const torch::Tensor& t) { return tp_.on() ? tp_.copy_to(t) : t; };
  const auto norm = [&](const torch::Tensor& t, const torch::Tensor& w, const torch::Tensor& b) {
    return at::layer_norm(t, {d}, tp_.replicated(w), tp_.replicated(b), cfg_.ln_eps);
  };
  const auto column = [&](int u, int i, const torch::Tensor& h, const std::vector<torch::Tensor>& w) {
    return tp_.rows_split() ? tp_.gathered_linear(h, w[i], w[i + 1]) : p.linear(u, i, in_tp(h), w[i], w[i + 1]);
  };
  const int u = static_cast<int>(l + 1);
  auto w = p.acquire(u);
  auto x = x_in;
  auto h = norm(x, w[kLn1W], w[kLn1B]);
  auto qkv = column(u, kAttnW, h, w).view({B, T, 3, H, Dh});  // (B, T, 3, H, Dh)
  // Ulysses: the whole sequence's q, k, v for H / sp of the heads (T becomes sp T below).
  if (sp_.on()) qkv = sp_.to_heads(qkv);
  // unbind, not three selects: its backward stacks the three gradients in one pass, where
  // each select's wrote a zeroed (B, T, 3, H, Dh) tensor and autograd summed the three
  // (0.36 s of a 9.3 s bf16 step at B16 x T512).
  const auto qkv3 = qkv.unbind(2);
  auto q = qkv3[0].transpose(1, 2);  // (B, H, T, Dh)
  auto k = qkv3[1].transpose(1, 2);
  auto v = qkv3[2].transpose(1, 2);
  if (kv) std::tie(k, v) = kv(l, k, v);
  // Selective checkpointing recomputes the (B, H, T, T) part in backward.
  auto a = attend(*attn_, p, q, k, v, m, ac_.attention() && !kv).transpose(1, 2);  // (B, T, H, Dh)
  if (sp_.on()) a = sp_.to_sequence(a);  // back to this rank's tokens, every head
  a = a.reshape({B * T, H * Dh});  // (B*T, H Dh)
  x = x + rows.apply(row_linear(p, u, kProjW, a, w[kProjW], w[kProjB]), attn_site(l));
  h = norm(x, w[kLn2W], w[kLn2B]);
  if (cfg_.moe.layer(l)) return x + rows.apply(moe(p, l, h, w, T), mlp_site(l));
  h = tp_.rows_split() ? at::gelu(column(u, kFcW, h, w), "tanh")
                       : p.linear_gelu(u, kFcW, in_tp(h), w[kFcW], w[kFcB], "tanh");  // (B*T, 4d / tp)
  return x + rows.apply(row_linear(p, u, kMlpW, h, w[kMlpW], w[kMlpB]), mlp_site(l));
}

int Gpt2::experts_unit(std::int64_t l) const {
  return static_cast<int>(cfg_.n_layer + 2 + l / cfg_.moe.every);  // after the head, in layer order
}

std::string Gpt2::expert_parallel_problem(int size) const {
  if (size > 1 && (tp_.on() || pp_.cut.on()))
    return fmt::format("model '{}': expert parallelism (mesh.ep = {}) does not run with mesh.tp "
                       "or mesh.pp yet; set them to 1", cfg_.preset, size);
  return models::expert_parallel_problem(cfg_.moe, size);
}

void Gpt2::set_expert_parallel(ExpertParallel ep) {
  const std::string why = expert_parallel_problem(ep.size);
  SB_CHECK(why.empty(), "{}", why);
  SB_CHECK(!ep.on() || (ep.all_to_all && ep.max), "model '{}': expert parallelism without its "
           "collectives", cfg_.preset);
  if (!ep.placement.empty()) {
    const std::string bad = placement_problem(ep.placement, cfg_.moe.layers(cfg_.n_layer), cfg_.moe.experts, ep.size);
    SB_CHECK(bad.empty(), "model '{}': expert placement: {}", cfg_.preset, bad);
  }
  ep_ = std::move(ep);
  units_ = make_units(tp_.rank, tp_.size);
}

namespace {

// moe_mlp over MoeConfig::sequence_groups column slices of h's rows of T tokens: each slice's
// tokens (row by row) one routing group, the outputs back in place, the losses averaged, the
// routings merged (slice by slice).
MoeOutput moe_by_slices(const MoeConfig& c, const torch::Tensor& h, std::int64_t T, const torch::Tensor& router,
                        const std::vector<torch::Tensor>& e, bool training) {
  const std::int64_t g = c.sequence_groups, d = h.size(1), B = h.size(0) / T;
  SB_CHECK(B * T == h.size(0) && T % g == 0, "moe: {} tokens are not rows of {} in {} equal slices", h.size(0), T, g);
  const auto x = h.view({B, g, T / g, d});
  std::vector<torch::Tensor> ys;
  MoeOutput out;
  MoeRouting& r = out.routing;
  r.load.assign(static_cast<std::size_t>(c.experts), 0);
  std::vector<torch::Tensor> choice, kept;
  for (std::int64_t s = 0; s < g; ++s) {
    auto o = moe_mlp(c, x.select(1, s).reshape({-1, d}), router, e[kExpFcW], e[kExpFcB], e[kExpProjW], e[kExpProjB],
                     training);
    ys.push_back(o.y.view({B, 1, T / g, d}));
    out.aux = s == 0 ? o.aux : out.aux + o.aux;
    out.z = s == 0 ? o.z : out.z + o.z;
    choice.push_back(o.routing.choice), kept.push_back(o.routing.kept);
    for (std::size_t i = 0; i < r.load.size(); ++i) r.load[i] += o.routing.load[i];
    r.dropped_assignments += o.routing.dropped_assignments;
    r.dropped_tokens += o.routing.dropped_tokens;
  }
  out.y = torch::cat(ys, 1).view({B * T, d});
  out.aux = out.aux / static_cast<double>(g);
  out.z = out.z / static_cast<double>(g);
  r.choice = torch::cat(choice), r.kept = torch::cat(kept);
  return out;
}

}  // namespace

torch::Tensor Gpt2::moe(ParamProvider& p, std::int64_t l, const torch::Tensor& h, const std::vector<torch::Tensor>& w,
                        std::int64_t T) {
  const bool training = torch::GradMode::is_enabled();
  SB_CHECK(ep_.placement.empty(), "model '{}': an expert placement applies to expert-parallel inference "
           "(ep_inference) alone; the ordinary forward holds experts in contiguous blocks", cfg_.preset);
  SB_CHECK(cfg_.moe.sequence_groups == 1 || !ep_.on(), "model '{}': sequence routing groups emulate "
           "Ulysses' in one process; an expert-parallel rank routes its own tokens", cfg_.preset);
  const int eu = experts_unit(l);
  const auto e = p.acquire(eu);
  auto o = cfg_.moe.sequence_groups > 1
               ? moe_by_slices(cfg_.moe, h, T, w[kRouterW], e, training)
               : moe_mlp(cfg_.moe, h, w[kRouterW], e[kExpFcW], e[kExpFcB], e[kExpProjW], e[kExpProjB], training,
                         ep_.on() ? &ep_ : nullptr);
  p.release(eu, o.y);
  if (routing_.size() != static_cast<std::size_t>(cfg_.n_layer)) routing_.resize(static_cast<std::size_t>(cfg_.n_layer));
  routing_[static_cast<std::size_t>(l)] = std::move(o.routing);
  if (training) moe_loss_ = moe_loss_.defined() ? moe_loss_ + o.aux + o.z : o.aux + o.z;
  return o.y;
}

void Gpt2::set_activation_checkpoint(const CheckpointConfig& c) {
  // A recomputed MoE block would lose its aux and z losses' graph (the first forward runs
  // without gradients) and could route differently in bf16: refused until it carries them.
  SB_CHECK(!cfg_.moe.on() || c.mode == CheckpointMode::None, "model '{}' (mixture of experts): "
           "activation checkpointing is not supported yet; set activation_checkpoint = \"none\"",
           cfg_.preset);
  SB_CHECK(!c.chunked() || cfg_.seq_chunks >= 1, "model '{}': activation_checkpoint = \"chunked\" runs "
           "each block on seq_chunks chunks of the sequence; set seq_chunks (1 or more; 1 keeps the "
           "block's keys and values, 2 and more chunk it)", cfg_.preset);
  ac_ = c;
  // Chunked blocks keep their keys and values in their own store and attend one chunk's
  // queries at a time: a variant that streams chunks (fpdt) does so in plain tiles inside.
  AttentionOptions o = cfg_.attention_options();
  if (c.chunked()) o.seq_chunks = 0, o.kv_offload = "none";
  attn_ = make_attention(cfg_.attention, o);
}

torch::Tensor Gpt2::final_norm(ParamProvider& p, const torch::Tensor& x) {
  auto wf = p.acquire(static_cast<int>(cfg_.n_layer + 1));
  return at::layer_norm(x, {cfg_.d_model}, tp_.replicated(wf[0]), tp_.replicated(wf[1]), cfg_.ln_eps);
}

torch::Tensor Gpt2::head(ParamProvider& p, torch::Tensor x, bool release_head_with_logits) {
  check_whole("the LM head's logits (evaluation, inference, distillation)");
  pp_.check_uncut(cfg_.preset, "the LM head's logits (inference, distillation, decoding)");
  const int head = static_cast<int>(cfg_.n_layer + 1);
  x = final_norm(p, x);
  auto wte = p.acquire(0)[0];
  auto logits = p.linear(0, 0, x, wte, torch::Tensor());  // (rows, V), tied LM head
  if (release_head_with_logits) {
    p.release(0, logits);
    p.release(head, logits);
  }
  return logits;
}

torch::Tensor Gpt2::forward(ParamProvider& p, const torch::Tensor& ids, KVCache* cache,
                            bool release_head_with_logits, torch::Tensor* hidden) {
  auto x = trunk(p, ids, cache);
  if (hidden) *hidden = x;
  return head(p, x, release_head_with_logits);
}

torch::Tensor Gpt2::trunk(ParamProvider& p, const torch::Tensor& ids, KVCache* cache,
                          const torch::Tensor& positions) {
  SB_CHECK(ids.dim() == 2, "GPT-2 input_ids must be (B, T), got {} dims", ids.dim());
  const std::int64_t B = ids.size(0), T = ids.size(1);
  const std::int64_t past = cache ? cache->length : 0;
  // A sequence slice (Ulysses) has its own positions; its attention sees the whole sequence
  // from position 0 (sequence_parallel.h), so the mask has no offset.
  const std::int64_t end = sp_.on() && !cache ? T * sp_.size : past + T;
  SB_CHECK(end <= cfg_.max_pos, "model '{}': sequence of {} tokens exceeds its {} positions",
           cfg_.preset, end, cfg_.max_pos);
  if (cache) SB_CHECK(past + T <= cache->max_len, "KV cache holds {} tokens, {} needed", cache->max_len, past + T);

  auto x = embed(p, ids, positions.defined() && !cache ? positions
                                                       : torch::arange(past, past + T, ids.options().dtype(torch::kLong)));
  AttentionMask mask;
  mask.causal = true;
  mask.q_offset = past;
  KeysValues kv;
  if (cache)
    kv = [&](std::int64_t l, const torch::Tensor& k, const torch::Tensor& v) {
      cache->k[l].narrow(2, past, T).copy_(k);
      cache->v[l].narrow(2, past, T).copy_(v);
      return std::make_pair(cache->k[l].narrow(2, 0, past + T),  // (B, H, past+T, Dh)
                            cache->v[l].narrow(2, 0, past + T));
    };
  x = blocks(p, x, B, T, kv, mask);
  if (cache) cache->length = past + T;
  return x;
}

torch::Tensor Gpt2::forward_rows(ParamProvider& p, const torch::Tensor& ids, KVCache& cache,
                                 std::int64_t first_row, const std::vector<std::int64_t>& past,
                                 const std::vector<std::int64_t>& last) {
  SB_CHECK(ids.dim() == 2, "GPT-2 input_ids must be (B, T), got {} dims", ids.dim());
  const std::int64_t B = ids.size(0), T = ids.size(1), H = cfg_.n_head;
  const std::int64_t rows = cache.k.at(0).size(0), cap = cache.max_len;
  SB_CHECK(static_cast<std::int64_t>(past.size()) == B && static_cast<std::int64_t>(last.size()) == B,
           "forward_rows: {} rows but {} lengths and {} last positions", B, past.size(), last.size());
  SB_CHECK(first_row >= 0 && first_row + B <= rows, "forward_rows: rows [{}, {}) outside the cache's {}",
           first_row, first_row + B, rows);
  const bool prefill = std::all_of(past.begin(), past.end(), [](auto n) { return n == 0; });
  SB_CHECK(prefill || T == 1, "forward_rows: a step is a prefill (every row empty) or one token per row");
  const std::int64_t longest = *std::max_element(past.begin(), past.end()) + T;
  SB_CHECK(longest <= cap, "KV cache rows hold {} tokens, {} needed", cap, longest);
  SB_CHECK(longest <= cfg_.max_pos, "model '{}': sequence of {} tokens exceeds its {} positions",
           cfg_.preset, longest, cfg_.max_pos);
  if (ep_serve_) return ep_forward_rows(p, ids, cache, first_row, past, last);
  const auto lopt = ids.options().dtype(torch::kLong);
  auto past_t = torch::tensor(past, torch::kLong).to(ids.device());  // (B)
  auto pos = past_t.unsqueeze(1) + torch::arange(T, lopt);           // (B, T)
  auto x = embed(p, ids, pos);

  AttentionMask mask;
  KeysValues kv;
  if (prefill) {  // rows are empty: write the T new keys at 0..T-1, attend causally among them
    mask.causal = true;
    kv = [&](std::int64_t l, const torch::Tensor& k, const torch::Tensor& v) {
      auto kr = cache.k[l].narrow(0, first_row, B).narrow(2, 0, T);
      auto vr = cache.v[l].narrow(0, first_row, B).narrow(2, 0, T);
      kr.copy_(k), vr.copy_(v);
      return std::make_pair(kr, vr);
    };
  } else {  // one token per row at position past[b]: each row sees its own keys 0..past[b]
    const std::int64_t Tk = longest;
    mask.key_keep = torch::arange(Tk, lopt).unsqueeze(0) <= past_t.unsqueeze(1);  // (B, Tk)
    // Row-major (rows, H, cap) index of each (b, h)'s new key: one index_copy_ per layer.
    auto slot = (torch::arange(first_row, first_row + B, lopt).unsqueeze(1) * H +
                 torch::arange(H, lopt).unsqueeze(0)) * cap + past_t.unsqueeze(1);  // (B, H)
    slot = slot.reshape({-1});
    kv = [&, Tk, slot](std::int64_t l, const torch::Tensor& k, const torch::Tensor& v) {
      const std::int64_t Dh = k.size(3);
      cache.k[l].view({-1, Dh}).index_copy_(0, slot, k.reshape({B * H, Dh}));
      cache.v[l].view({-1, Dh}).index_copy_(0, slot, v.reshape({B * H, Dh}));
      return std::make_pair(cache.k[l].narrow(0, first_row, B).narrow(2, 0, Tk),
                            cache.v[l].narrow(0, first_row, B).narrow(2, 0, Tk));
    };
  }
  x = blocks(p, x, B, T, kv, mask);  // (B*T, d)
  auto at_last = torch::tensor(last, torch::kLong).to(ids.device()) + torch::arange(B, lopt) * T;
  return head(p, x.index_select(0, at_last), true);  // (B, V)
}

torch::Tensor Gpt2::lm_loss(ParamProvider& p, const torch::Tensor& trunk_out, const torch::Tensor& t) {
  const auto x = final_norm(p, trunk_out);  // this rank's rows under sp
  const auto wte = p.acquire(0)[0];
  torch::Tensor loss;
  if (tp_.on()) {  // logits split by vocabulary, never gathered
    const auto logits = tp_.rows_split() ? tp_.gathered_linear(x, wte, torch::Tensor())
                                         : p.linear(0, 0, tp_.copy_to(x), wte, torch::Tensor());
    loss = tp_.cross_entropy(logits, t, vocab_range(cfg_.vocab, tp_.rank, tp_.size).first);
  } else {  // the provider's LM-head loss (chunked for plain weights)
    loss = p.linear_cross_entropy(0, 0, x, wte, t);
  }
  p.release(0, loss);
  p.release(static_cast<int>(cfg_.n_layer + 1), loss);
  return loss;
}

torch::Tensor Gpt2::loss_with(ParamProvider& p, const Batch& b, const LossCombiner& c) {
  SB_CHECK(b.targets.defined(), "GPT-2 loss needs targets (B, T)");
  pp_.check_uncut(cfg_.preset, "the loss of a whole forward");
  const auto masks = dropout_.begin(b, cfg_.n_head, tp_.rank, tp_.size, tp_.rows_split(), sp_.rank, sp_.size);
  const auto t = b.targets.reshape({-1});
  SB_CHECK(!sp_.on() || b.row_tokens() == b.input_ids.size(1) * sp_.size, "model '{}': under "
           "mesh.sp = {} a batch holds one of sp equal slices of each row (data::sequence_slice); "
           "got {} of {} tokens", cfg_.preset, sp_.size, b.input_ids.size(1), b.row_tokens());
  // Chunked blocks inside Ulysses gather each chunk from the ranks' stripes: a slice cut
  // otherwise would attend across the wrong tokens without any other error.
  SB_CHECK(!sp_.on() || b.seq_stripe == sequence_stripe(b.row_tokens()), "model '{}': under mesh.sp = {} "
           "this model takes sequence slices in stripes of {} tokens (0: contiguous; Model::sequence_stripe), "
           "got {}: slice with data::sequence_slice(..., model.sequence_stripe(seq))", cfg_.preset, sp_.size,
           sequence_stripe(b.row_tokens()), b.seq_stripe);
  moe_loss_ = torch::Tensor();  // this forward's MoE aux and z losses (moe.h)
  const auto with_moe = [this](torch::Tensor l) { return moe_loss_.defined() ? l + moe_loss_ : l; };
  if (!c.combine) return with_moe(lm_loss(p, trunk(p, b.input_ids, nullptr, b.positions()), t));
  LossParts parts;
  auto logits = forward(p, b.input_ids, nullptr, false, c.hidden ? &parts.hidden : nullptr);  // (B*T, V)
  parts.loss = cross_entropy(logits, t);  // fp32 whatever the compute dtype (loss.h)
  parts.logits = logits.index_select(0, (t != -100).nonzero().squeeze(1));  // (terms, V)
  auto loss = with_moe(c.combine(parts));
  p.release(0, loss);
  p.release(static_cast<int>(cfg_.n_layer + 1), loss);
  return loss;
}

torch::Tensor Gpt2::logits(ParamProvider& p, const Batch& b) {
  return forward(p, b.input_ids, nullptr, true).view({b.input_ids.size(0), b.input_ids.size(1), cfg_.vocab});
}

KVCache Gpt2::make_cache(std::int64_t batch, std::int64_t max_len, torch::TensorOptions opts) const {
  SB_CHECK(max_len <= cfg_.max_pos, "KV cache of {} tokens exceeds model '{}' positions ({})",
           max_len, cfg_.preset, cfg_.max_pos);
  KVCache c;
  c.max_len = max_len;
  const std::int64_t H = cfg_.n_head, Dh = cfg_.dh();
  for (std::int64_t l = 0; l < cfg_.n_layer; ++l) {
    c.k.push_back(torch::zeros({batch, H, max_len, Dh}, opts));
    c.v.push_back(torch::zeros({batch, H, max_len, Dh}, opts));
  }
  return c;
}

torch::Tensor Gpt2::forward_cached(ParamProvider& p, const torch::Tensor& ids, KVCache& cache) {
  return forward(p, ids, &cache, true).view({ids.size(0), ids.size(1), cfg_.vocab});
}

GenerateResult generate(Gpt2& model, ParamProvider& p, const torch::Tensor& prompt,
                        const GenerateConfig& cfg) {
  torch::NoGradGuard no_grad;
  SB_CHECK(prompt.dim() == 2 && prompt.size(1) > 0, "generate: prompt must be (B, t) with t > 0");
  SB_CHECK(cfg.max_new_tokens >= 1, "generate: max_new_tokens must be at least 1, got {}", cfg.max_new_tokens);
  const std::int64_t B = prompt.size(0), t0 = prompt.size(1);
  auto wte = p.acquire(0)[0];
  p.release(0, wte);
  auto cache = model.make_cache(B, t0 + cfg.max_new_tokens, wte.options());
  auto gen = at::make_generator<at::CPUGeneratorImpl>(cfg.seed);

  // logits (B, V) of the last position -> next tokens (B, 1)
  auto choose = [&](torch::Tensor last) {
    if (cfg.temperature <= 0) return last.argmax(-1, true);
    last = last.to(torch::kFloat32).div(cfg.temperature);
    if (cfg.top_k > 0 && cfg.top_k < last.size(-1)) {
      auto kth = std::get<0>(last.topk(cfg.top_k, -1)).narrow(-1, cfg.top_k - 1, 1);  // (B, 1)
      last = last.masked_fill(last < kth, -INFINITY);
    }
    // Sampled on the CPU from our generator so that results do not depend on the device.
    auto probs = torch::softmax(last, -1).cpu();
    return at::multinomial(probs, 1, false, gen).to(last.device());
  };

  GenerateResult r;
  auto t = std::chrono::steady_clock::now();
  auto logits = model.forward_cached(p, prompt, cache);  // (B, t0, V)
  auto next = choose(logits.select(1, t0 - 1));
  std::vector<torch::Tensor> out = {prompt, next};
  r.time_to_first_token_s = seconds_since(t);
  for (std::int64_t i = 1; i < cfg.max_new_tokens; ++i) {
    t = std::chrono::steady_clock::now();
    logits = model.forward_cached(p, next, cache);  // (B, 1, V)
    next = choose(logits.select(1, 0));
    out.push_back(next);
    r.per_token_s.push_back(seconds_since(t));
  }
  r.tokens = torch::cat(out, 1);
  return r;
}

}  // namespace sb::models
