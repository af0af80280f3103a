// BERT forward: encoder, MLM head (tied decoder), pooler and classification head.
#include "workloads/models/bert.h"

#include "harness/core/check.h"
#include "workloads/models/loss.h"
#include "workloads/models/checkpoint.h"
#include "workloads/models/stage_provider.h"

namespace sb::models {
namespace {

ParamSpec normal(std::string name, std::vector<std::int64_t> shape) {
  ParamSpec p{std::move(name), std::move(shape)};
  p.decay = p.shape.size() >= 2;
  return p;
}
ParamSpec fill(std::string name, std::vector<std::int64_t> shape, ParamSpec::Init init) {
  ParamSpec p{std::move(name), std::move(shape)};
  p.init = init;
  p.decay = false;
  return p;
}

// Parameter indices, in UnitSpec order.
enum Embed { kWord, kPos, kType, kEmbLnW, kEmbLnB };
enum Block { kQW, kQB, kKW, kKB, kVW, kVB, kAoW, kAoB, kAoLnW, kAoLnB, kIW, kIB, kOW, kOB, kOLnW, kOLnB };
enum Head { kPoolW, kPoolB, kTrW, kTrB, kTrLnW, kTrLnB, kDecB, kClsW, kClsB };

}  // namespace

Bert::Bert(ModelConfig cfg) : cfg_(std::move(cfg)) {
  SB_CHECK(cfg_.head_dim > 0 || cfg_.d_model % cfg_.n_head == 0,
           "model '{}': d_model {} is not divisible by n_head {}", cfg_.preset, cfg_.d_model, cfg_.n_head);
  attn_ = make_attention(cfg_.attention, cfg_.attention_options());
  units_ = whole_units_ = make_units(0, 1);
}

std::vector<UnitSpec> Bert::make_units(int r, int n) const {
  const std::int64_t d = cfg_.d_model, f = cfg_.d_ff, A = cfg_.attn_width();
  const auto Z = ParamSpec::Init::Zeros, O = ParamSpec::Init::Ones;
  auto tp = [&](ParamSpec s, TpSplit how) { return tp_split(std::move(s), how, r, n); };
  const auto Col = TpSplit::Rows, Row = TpSplit::Cols, Voc = TpSplit::Vocab;
  std::vector<UnitSpec> units;
  const std::string e = "bert.embeddings.";
  units.push_back({"embed",
                   {tp(normal(e + "word_embeddings.weight", {cfg_.vocab, d}), Voc),
                    normal(e + "position_embeddings.weight", {cfg_.max_pos, d}),
                    normal(e + "token_type_embeddings.weight", {cfg_.type_vocab, d}),
                    fill(e + "LayerNorm.weight", {d}, O), fill(e + "LayerNorm.bias", {d}, Z)}});
  for (std::int64_t i = 0; i < cfg_.n_layer; ++i) {
    const std::string h = "bert.encoder.layer." + std::to_string(i) + ".";
    units.push_back({"block." + std::to_string(i),
                     {tp(normal(h + "attention.self.query.weight", {A, d}), Col), tp(fill(h + "attention.self.query.bias", {A}, Z), Col),
                      tp(normal(h + "attention.self.key.weight", {A, d}), Col), tp(fill(h + "attention.self.key.bias", {A}, Z), Col),
                      tp(normal(h + "attention.self.value.weight", {A, d}), Col), tp(fill(h + "attention.self.value.bias", {A}, Z), Col),
                      tp(normal(h + "attention.output.dense.weight", {d, A}), Row), fill(h + "attention.output.dense.bias", {d}, Z),
                      fill(h + "attention.output.LayerNorm.weight", {d}, O), fill(h + "attention.output.LayerNorm.bias", {d}, Z),
                      tp(normal(h + "intermediate.dense.weight", {f, d}), Col), tp(fill(h + "intermediate.dense.bias", {f}, Z), Col),
                      tp(normal(h + "output.dense.weight", {d, f}), Row), fill(h + "output.dense.bias", {d}, Z),
                      fill(h + "output.LayerNorm.weight", {d}, O), fill(h + "output.LayerNorm.bias", {d}, Z)}});
  }
  units.push_back({"head",
                   {normal("bert.pooler.dense.weight", {d, d}), fill("bert.pooler.dense.bias", {d}, Z),
                    normal("cls.predictions.transform.dense.weight", {d, d}),
                    fill("cls.predictions.transform.dense.bias", {d}, Z),
                    fill("cls.predictions.transform.LayerNorm.weight", {d}, O),
                    fill("cls.predictions.transform.LayerNorm.bias", {d}, Z),
                    tp(fill("cls.predictions.bias", {cfg_.vocab}, Z), Voc),
                    normal("classifier.weight", {cfg_.num_labels, d}), fill("classifier.bias", {cfg_.num_labels}, Z)}});
  return units;
}

std::string Bert::tensor_parallel_problem(int n) const { return megatron_problem(cfg_, n); }

void Bert::set_tensor_parallel(TensorParallel tp) {
  const std::string why = tensor_parallel_problem(tp.size);
  SB_CHECK(why.empty(), "{}", why);
  check_functions(tp, true);
  units_ = make_units(tp.rank, tp.size);
  tp_ = std::move(tp);
}

std::string Bert::pipeline_problem(int stages) const { return models::pipeline_problem(cfg_.n_layer, stages); }

void Bert::set_pipeline(int pp, int v, int rank, const std::vector<std::int64_t>& stage_layers) {
  // Per row, forward + backward: a block's weights, the embeddings' LayerNorm on the first
  // stage, the heads' weights on the last (the MLM decoder's V x d on its ~15% masked rows).
  // units_: this tp rank's blocks.
  const double head = unit_flops_per_row(whole_units_.back()).total() +
                      0.15 * 6.0 * static_cast<double>(cfg_.vocab * cfg_.d_model);
  units_ = pp_.apply(cfg_.preset, units_, pp, v, rank, unit_flops_per_row(whole_units_[1]).total(),
                     unit_flops_per_row(whole_units_[0]).vector, head, true, stage_layers);
}

std::vector<std::int64_t> Bert::stage_activation_shape(const Batch& b) const {
  const std::int64_t rows = b.input_ids.numel();
  return {tp_.rows_split() ? rows / tp_.size : rows, cfg_.d_model};
}

void Bert::set_dropout(const DropoutConfig& d) {
  dropout_.configure(d, cfg_.preset, attn_->drops_probabilities(), attn_->name());
}

torch::Tensor Bert::stage_forward(ParamProvider& p0, int chunk, const Batch& b, const torch::Tensor& input) {
  SB_CHECK(pp_.cut.on(), "model '{}' is not cut into pipeline stages", cfg_.preset);
  const auto masks = dropout_.begin(b, cfg_.n_head, tp_.rank, tp_.size, tp_.rows_split());
  ParamProvider& p = stages_.get(p0, pp_.local);
  const int s = pp_.cut.stage(chunk);
  auto x = encode(p, b, pp_.cut.first_layer[s], pp_.cut.first_layer[s + 1],
                  pp_.cut.first(chunk) ? torch::Tensor() : input);
  return pp_.cut.last(chunk) ? loss_from(p, x, b, {}) : x;
}

torch::Tensor Bert::word_embedding(const torch::Tensor& table, const torch::Tensor& ids) {
  if (!tp_.on()) return at::embedding(table, ids);
  const std::int64_t begin = vocab_range(cfg_.vocab, tp_.rank, tp_.size).first;
  const auto mine = (ids >= begin) & (ids < begin + table.size(0));
  auto local = at::embedding(table, torch::where(mine, ids - begin, torch::zeros_like(ids)));
  return local * mine.unsqueeze(-1).to(local.scalar_type());  // this rank's part of the sum
}

torch::Tensor Bert::row_linear(ParamProvider& p, int u, int w_index, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& b) {
  if (!tp_.on()) return p.linear(u, w_index, x, w, b);
  if (tp_.rows_split()) return tp_.scatter_rows(p.linear(u, w_index, x, w, torch::Tensor())) + tp_.replicated(b);
  return tp_.reduce_from(p.linear(u, w_index, x, w, torch::Tensor())) + b;
}

// The embeddings' sum and LayerNorm on this rank's block of the B*T rows (sequence parallelism).
torch::Tensor Bert::embed_rows(const std::vector<torch::Tensor>& e, const Batch& b, const torch::Tensor& pos) {
  const std::int64_t d = cfg_.d_model;
  const auto& ids = b.input_ids;
  auto x = tp_.scatter_rows(word_embedding(e[kWord], ids).view({-1, d}));  // (R, d)
  const std::int64_t R = x.size(0), first = tp_.rank * R;
  const auto rows = [&](const torch::Tensor& t) { return t.expand(ids.sizes()).reshape({-1}).narrow(0, first, R); };
  x = x + at::embedding(tp_.replicated(e[kPos]), rows(pos));
  const auto type = tp_.replicated(e[kType]);
  x = b.token_type_ids.defined() ? x + at::embedding(type, rows(b.token_type_ids)) : x + type[0];
  return at::layer_norm(x, {d}, tp_.replicated(e[kEmbLnW]), tp_.replicated(e[kEmbLnB]), cfg_.ln_eps);
}

TrainFlops Bert::train_flops(const Batch& b) const {
  // What loss_with runs (docs/METRICS.md "Model FLOPs"): the encoder on every position (the
  // word, position and token-type embeddings are lookups; their LayerNorm counts), attention
  // 12 L T A per token as GPT-2's; then only the heads the batch asks for: the MLM head
  // (transform d x d, decoder tied to the word embeddings V x d) on the masked positions alone,
  // and the pooler (d x d) and classifier (labels x d) on each sequence's first token.
  const double tokens = static_cast<double>(b.input_ids.numel()), T = static_cast<double>(b.input_ids.size(1));
  const auto& units = whole_units_;  // the model's FLOPs, whatever this rank's share
  const auto& e = units[0].params;
  const auto& h = units.back().params;
  auto per_row = [](std::initializer_list<const ParamSpec*> ps) {
    TrainFlops f;
    for (const auto* p : ps) (p->shape.size() >= 2 ? f.matmul : f.vector) += 6.0 * static_cast<double>(p->numel());
    return f;
  };
  TrainFlops row = per_row({&e[kEmbLnW], &e[kEmbLnB]});
  for (std::int64_t l = 1; l <= cfg_.n_layer; ++l) {
    const auto u = unit_flops_per_row(units[l]);
    row.matmul += u.matmul, row.vector += u.vector;
  }
  TrainFlops f;
  f.attention = tokens * 12.0 * static_cast<double>(cfg_.n_layer) * T * static_cast<double>(cfg_.attn_width());
  f.attention_executed = attn_->executed_scores(false) * f.attention;
  f.matmul = tokens * row.matmul + f.attention;
  f.vector = tokens * row.vector;
  std::vector<std::string> parts = {"encoder on every position, attention 12 L T A"};
  if (b.targets.defined()) {
    const auto mlm = per_row({&h[kTrW], &h[kTrB], &h[kTrLnW], &h[kTrLnB], &e[kWord], &h[kDecB]});
    const double masked = static_cast<double>(target_count(b));
    f.matmul += masked * mlm.matmul, f.vector += masked * mlm.vector;
    parts.push_back(fmt::format("MLM head (transform {0} x {0}, decoder {1} x {0}) on the masked positions only",
                                cfg_.d_model, cfg_.vocab));
  }
  if (b.labels.defined()) {
    const auto cls = per_row({&h[kPoolW], &h[kPoolB], &h[kClsW], &h[kClsB]});
    const double rows = static_cast<double>(b.cls_index.defined() ? b.cls_index.numel() : b.input_ids.size(0));
    f.matmul += rows * cls.matmul, f.vector += rows * cls.vector;
    parts.push_back(fmt::format("pooler ({0} x {0}) and classifier ({1} x {0}) on each sequence's first token",
                                cfg_.d_model, cfg_.num_labels));
  }
  f.counted = fmt::format("{}", fmt::join(parts, "; "));
  return f;
}

torch::Tensor Bert::embed(ParamProvider& p, const Batch& b) {
  const auto& ids = b.input_ids;
  const std::int64_t B = ids.size(0), T = ids.size(1), d = cfg_.d_model;
  auto e = p.acquire(0);
  auto pos = b.position_ids.defined() ? b.position_ids : torch::arange(T, ids.options().dtype(torch::kLong));
  torch::Tensor x;
  if (tp_.rows_split()) {
    x = embed_rows(e, b, pos);  // (B*T / tp, d)
  } else {
    auto word = word_embedding(e[kWord], ids);
    x = (tp_.on() ? tp_.reduce_from(word) : word) + at::embedding(e[kPos], pos);  // (B, T, d)
    x = b.token_type_ids.defined() ? x + at::embedding(e[kType], b.token_type_ids) : x + e[kType][0];
    x = at::layer_norm(x.view({B * T, d}), {d}, e[kEmbLnW], e[kEmbLnB], cfg_.ln_eps);  // (B*T, d)
  }
  x = dropout_.rows.apply(x, embed_site());
  p.release(0, x);
  return x;
}

torch::Tensor Bert::encode(ParamProvider& p, const Batch& b, std::int64_t first, std::int64_t last,
                           const torch::Tensor& input) {
  const auto& ids = b.input_ids;
  SB_CHECK(ids.dim() == 2, "BERT input_ids must be (B, T), got {} dims", ids.dim());
  const std::int64_t B = ids.size(0), T = ids.size(1);
  SB_CHECK(b.position_ids.defined() || T <= cfg_.max_pos,
           "model '{}': sequence of {} tokens exceeds its {} positions", cfg_.preset, T, cfg_.max_pos);

  torch::Tensor x = input.defined() ? input : embed(p, b);

  AttentionMask mask;
  if (b.attention_mask.defined()) mask.key_keep = b.attention_mask.to(torch::kBool);  // (B, T)
  mask.segment_ids = b.segment_ids;
  // By value: a recomputation in backward (checkpoint.h) must see this forward's masks.
  const DropoutRows rows = dropout_.rows;
  for (std::int64_t l = first; l < (last < 0 ? cfg_.n_layer : last); ++l) {
    const AttentionMask m = with_dropout(mask, dropout_.attn, l);
    if (ac_.block(l)) {
      x = checkpointed(p, [this, &p, l, B, T, m, rows](const std::vector<torch::Tensor>& in) {
        return block(p, l, in[0], B, T, m, rows);
      }, {x});
    } else {
      x = block(p, l, x, B, T, m, rows);
    }
    p.release(static_cast<int>(l + 1), x);
  }
  return x;
}

torch::Tensor Bert::block(ParamProvider& p, std::int64_t l, const torch::Tensor& x_in, std::int64_t B,
                          std::int64_t T, const AttentionMask& m, const DropoutRows& rows) {
  // Under tp this rank runs H / tp heads and d_ff / tp MLP columns (tensor_parallel.h).
  const std::int64_t d = cfg_.d_model, H = cfg_.n_head / tp_.size, Dh = cfg_.dh();
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, H, Dh}).transpose(1, 2); };
  const auto in_tp = [&](const torch::Tensor& t) { return tp_.on() ? tp_.copy_to(t) : t; };
  const int u = static_cast<int>(l + 1);
  auto w = p.acquire(u);
  auto x = x_in;
  torch::Tensor q, k, v;
  if (tp_.rows_split()) {  // one gathered GEMM for the three (this rank's heads of each)
    auto qkv = tp_.gathered_linear(x, torch::cat({w[kQW], w[kKW], w[kVW]}), torch::cat({w[kQB], w[kKB], w[kVB]}));
    auto parts = qkv.chunk(3, 1);
    q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
  } else {
    const auto xt = in_tp(x);
    q = heads(p.linear(u, kQW, xt, w[kQW], w[kQB]));  // (B, H, T, Dh)
    k = heads(p.linear(u, kKW, xt, w[kKW], w[kKB]));
    v = heads(p.linear(u, kVW, xt, w[kVW], w[kVB]));
  }
  // Selective checkpointing recomputes the (B, H, T, T) part in backward.
  const auto a = attend(*attn_, p, q, k, v, m, ac_.attention()).transpose(1, 2).reshape({B * T, H * Dh});  // (B*T, H Dh)
  const auto norm = [&](const torch::Tensor& t, int i) {
    return at::layer_norm(t, {d}, tp_.replicated(w[i]), tp_.replicated(w[i + 1]), cfg_.ln_eps);
  };
  x = norm(x + rows.apply(row_linear(p, u, kAoW, a, w[kAoW], w[kAoB]), attn_site(l)), kAoLnW);
  auto h = tp_.rows_split() ? at::gelu(tp_.gathered_linear(x, w[kIW], w[kIB]), "none")
                            : p.linear_gelu(u, kIW, in_tp(x), w[kIW], w[kIB], "none");  // (B*T, 4d / tp), erf GELU
  return norm(x + rows.apply(row_linear(p, u, kOW, h, w[kOW], w[kOB]), mlp_site(l)), kOLnW);
}

namespace {
// MLM head on selected rows: x (N, d) -> (N, V).
torch::Tensor mlm_logits(ParamProvider& p, int head, const std::vector<torch::Tensor>& w,
                         const torch::Tensor& word, const torch::Tensor& x, double eps) {
  auto t = p.linear_gelu(head, kTrW, x, w[kTrW], w[kTrB], "none");
  t = at::layer_norm(t, {t.size(-1)}, w[kTrLnW], w[kTrLnB], eps);
  return p.linear(0, 0, t, word, w[kDecB]);  // decoder tied to the word embeddings
}
// Pooled [CLS] -> classification logits: x (B*T, d) -> (B, num_labels), or (N, num_labels)
// for the N packed sequences starting at rows cls_index of x.
// drop: dropout on the pooled output before the classifier (Hugging Face's classifier
// dropout), its rows keyed by each sequence's [CLS] token; off when not given.
torch::Tensor cls_logits(ParamProvider& p, int head, const std::vector<torch::Tensor>& w,
                         const torch::Tensor& x, std::int64_t B, std::int64_t T,
                         const torch::Tensor& cls_index, const DropoutRows& drop = {}) {
  auto first = cls_index.defined() ? x.index_select(0, cls_index) : x.view({B, T, x.size(-1)}).select(1, 0);
  auto pooled = drop.apply(torch::tanh(p.linear(head, kPoolW, first, w[kPoolW], w[kPoolB])), pooled_site());
  return p.linear(head, kClsW, pooled, w[kClsW], w[kClsB]);
}
}  // namespace

torch::Tensor Bert::loss_with(ParamProvider& p, const Batch& b, const LossCombiner& c) {
  SB_CHECK(b.targets.defined() || b.labels.defined(),
           "BERT loss needs MLM targets (B, T) or classification labels (B), or both");
  SB_CHECK(!tp_.on() || !c.combine, "model '{}': distillation is not implemented for a "
           "tensor-parallel model (mesh.tp = {})", cfg_.preset, tp_.size);
  pp_.check_uncut(cfg_.preset, "the loss of a whole forward");
  const auto masks = dropout_.begin(b, cfg_.n_head, tp_.rank, tp_.size, tp_.rows_split());
  return loss_from(p, encode(p, b), b, c);
}

torch::Tensor Bert::loss_from(ParamProvider& p, torch::Tensor x, const Batch& b, const LossCombiner& c) {
  SB_CHECK(b.targets.defined() || b.labels.defined(),
           "BERT loss needs MLM targets (B, T) or classification labels (B), or both");
  const std::int64_t B = b.input_ids.size(0), T = b.input_ids.size(1);
  if (tp_.rows_split()) x = tp_.all_rows(x);  // the heads run replicated on every row
  const int head = static_cast<int>(cfg_.n_layer + 1);
  auto w = p.acquire(head);
  torch::Tensor loss;
  LossParts parts;
  if (c.hidden) parts.hidden = x;
  bool used_word = false;
  if (b.targets.defined()) {
    // Only masked positions reach the V-wide decoder: same mean cross-entropy as full
    // logits with ignore_index -100, at ~15% of the cost.
    auto t = b.targets.reshape({-1});
    auto idx = (t != -100).nonzero().squeeze(1);  // (N)
    auto word = p.acquire(0)[kWord];
    used_word = true;
    if (tp_.on()) {  // the decoder's columns split by vocabulary, never gathered
      auto tr = p.linear_gelu(head, kTrW, x.index_select(0, idx), w[kTrW], w[kTrB], "none");
      tr = tp_.copy_to(at::layer_norm(tr, {tr.size(-1)}, w[kTrLnW], w[kTrLnB], cfg_.ln_eps));
      loss = tp_.cross_entropy(p.linear(0, 0, tr, word, w[kDecB]), t.index_select(0, idx),
                               vocab_range(cfg_.vocab, tp_.rank, tp_.size).first);
    } else {
      auto logits = mlm_logits(p, head, w, word, x.index_select(0, idx), cfg_.ln_eps);  // (N, V)
      loss = cross_entropy(logits, t.index_select(0, idx));  // fp32 (loss.h)
      parts.logits = logits;  // the loss terms are the masked positions
    }
  }
  if (b.labels.defined()) {
    DropoutRows pooled;  // the [CLS] rows' masks (training, one sequence a row)
    if (dropout_.rows.on() && !b.cls_index.defined()) {
      pooled = dropout_.rows;
      pooled.token = (torch::arange(B, b.input_ids.options().dtype(torch::kLong)) + b.row0) * T;
    }
    auto logits = cls_logits(p, head, w, x, B, T, b.cls_index, pooled);  // (B, num_labels)
    auto ce = cross_entropy(logits, b.labels);
    loss = loss.defined() ? loss + ce : ce;
    if (!parts.logits.defined()) parts.logits = logits;  // labels only: the rows are the terms
  }
  if (c.combine) {
    parts.loss = loss;
    loss = c.combine(parts);
  }
  if (used_word) p.release(0, loss);
  p.release(head, loss);
  return loss;
}

torch::Tensor Bert::logits(ParamProvider& p, const Batch& b) {
  pp_.check_uncut(cfg_.preset, "MLM logits");
  SB_CHECK(!tp_.on(), "model '{}': MLM logits are not implemented for a tensor-parallel model "
           "(mesh.tp = {}); tensor parallelism runs training's loss and classify", cfg_.preset, tp_.size);
  const std::int64_t B = b.input_ids.size(0), T = b.input_ids.size(1);
  auto x = encode(p, b);
  const int head = static_cast<int>(cfg_.n_layer + 1);
  auto w = p.acquire(head);
  auto word = p.acquire(0)[kWord];
  auto logits = mlm_logits(p, head, w, word, x, cfg_.ln_eps);  // (B*T, V)
  p.release(0, logits);
  p.release(head, logits);
  return logits.view({B, T, cfg_.vocab});
}

torch::Tensor Bert::classify(ParamProvider& p, const Batch& b) {
  pp_.check_uncut(cfg_.preset, "classification");
  const std::int64_t B = b.input_ids.size(0), T = b.input_ids.size(1);
  auto x = encode(p, b);
  if (tp_.rows_split()) x = tp_.all_rows(x);
  const int head = static_cast<int>(cfg_.n_layer + 1);
  auto w = p.acquire(head);
  auto out = cls_logits(p, head, w, x, B, T, b.cls_index);  // (B, num_labels)
  p.release(head, out);
  return out;
}

void Bert::set_activation_checkpoint(const CheckpointConfig& c) {
  // FPDT's chunk pipeline walks a causal sequence's chunks once each way; a bidirectional
  // encoder's every chunk needs every later one's keys.
  SB_CHECK(!c.chunked(), "model '{}': activation_checkpoint = \"chunked\" pipelines a causal model's "
           "chunks; BERT attends both ways: use \"full\" or \"selective\"", cfg_.preset);
  ac_ = c;
}

}  // namespace sb::models
