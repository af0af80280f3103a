// "fpdt" attention: the chunked attention of the Fully Pipelined Distributed Transformer (Yao
// et al., 2024; docs/FSDP.md "FPDT"). The sequence is split into chunks (seq_chunks of them,
// or attention_chunk tokens each); each query chunk attends to the key chunks it may see with
// an online softmax (the online variant's math, statistics in fp32), so no (T, T) score matrix
// exists and causal chunks above the diagonal are never formed. Its own backward (flash
// attention's, from the saved row log-sum-exp) walks the key/value chunks in reverse, reading
// each once, so the forward keeps q, the output and the log-sum-exp in memory while every
// chunk's keys and values wait in a chunk store (kv_store.h, kv_offload): "none" keeps them in memory,
// "host" in CPU memory (a GPU run's host offload), "disk" in an O_DIRECT file under
// offload_dir. Writes run on an I/O thread while later chunks compute; backward reads chunk
// j - 1 while chunk j computes (double-buffered). Checked against naive in outputs and
// gradients (tests/unit/models_attention.cpp) and offloaded against in memory bit for bit.
#include <algorithm>
#include <cmath>
#include <memory>

#include <torch/autograd.h>

#include "harness/core/check.h"
#include "harness/workload.h"
#include "workloads/models/attention.h"
#include "workloads/models/kv_store.h"

namespace sb::models {
namespace {

using torch::Tensor;
constexpr double kMasked = -1e30;  // finite: a fully masked chunk gives exp() = 0, not NaN

std::int64_t chunks_of(std::int64_t t, std::int64_t chunk) { return (t + chunk - 1) / chunk; }
// The softmax statistics' and accumulators' dtype: fp32, or double for double inputs.
torch::ScalarType stats_type(const Tensor& q) { return at::promote_types(q.scalar_type(), torch::kFloat32); }

// Masks the scores of queries [s, s + n) against keys [j, j + nk) in place; nothing to do
// for a causal block wholly below the diagonal without padding or segments (most of them).
void mask_block(Tensor& sc, const AttentionMask& mask, std::int64_t s, std::int64_t n,
                std::int64_t j, std::int64_t nk) {
  const bool plain = !mask.key_keep.defined() && !mask.segment_ids.defined();
  if (plain && (!mask.causal || j + nk - 1 <= mask.q_offset + s)) return;
  auto keep = attention_keep_mask(mask, s, n, j, nk, sc.device());
  if (keep.defined()) sc.masked_fill_(keep.logical_not(), kMasked);
}

// Forward over query chunks: online softmax over the key chunks each may see. Stores each
// key/value chunk when a query chunk first reaches it (then any left); lse: the rows'
// log-sum-exp (fp32) when asked for.
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
              std::int64_t chunk, KvStore* store, Tensor* lse) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  const std::int64_t tq = q.size(2), tk = k.size(2), nkv = chunks_of(tk, chunk);
  std::int64_t stored = 0;
  const auto store_upto = [&](std::int64_t end) {
    for (; store && stored < std::min(end, nkv); ++stored) {
      const std::int64_t j0 = stored * chunk, n = std::min(chunk, tk - j0);
      store->put(k.narrow(2, j0, n), v.narrow(2, j0, n));
    }
  };
  const auto f32 = stats_type(q);
  std::vector<Tensor> outs, lses;
  for (std::int64_t s = 0; s < tq; s += chunk) {
    const std::int64_t n = std::min(chunk, tq - s);
    const std::int64_t kend = mask.causal ? std::min(tk, mask.q_offset + s + n) : tk;
    store_upto(chunks_of(kend, chunk));
    auto qc = q.narrow(2, s, n).mul(scale);
    Tensor m, l, acc;  // fp32 (stats_type): (B, H, n, 1), (B, H, n, 1), (B, H, n, Dh)
    for (std::int64_t j = 0; j < kend; j += chunk) {
      const std::int64_t nk = std::min(chunk, kend - j);
      auto sc = torch::matmul(qc, k.narrow(2, j, nk).transpose(-2, -1)).to(f32);
      mask_block(sc, mask, s, n, j, nk);
      auto mn = std::get<0>(sc.max(-1, /*keepdim=*/true));
      if (m.defined()) mn = torch::maximum(m, mn);
      auto p = sc.sub_(mn).exp_();  // in place: the scores are not needed again
      auto pv = torch::matmul(p.to(v.scalar_type()), v.narrow(2, j, nk)).to(f32);
      if (!m.defined()) {
        l = p.sum(-1, true), acc = pv;
      } else {
        auto alpha = torch::exp(m - mn);
        l = l * alpha + p.sum(-1, true), acc = acc * alpha + pv;
      }
      m = mn;
    }
    outs.push_back((acc / l).to(q.scalar_type()));
    if (lse) lses.push_back(m + torch::log(l));
  }
  store_upto(nkv);  // keys no query saw (a short query block) still have gradients: zero
  if (lse) *lse = lses.size() == 1 ? lses[0] : torch::cat(lses, 2);
  return outs.size() == 1 ? outs[0] : torch::cat(outs, 2);
}

struct Call {
  const AttentionMask* mask;
  std::int64_t chunk;
  const AttentionOptions* opts;
};

struct FpdtFunction : torch::autograd::Function<FpdtFunction> {
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Call& c) {
    auto store = std::make_shared<KvStore>(c.opts->kv_offload, c.opts->offload_dir);
    Tensor lse;
    auto out = attend(q, k, v, *c.mask, c.chunk, store.get(), &lse);
    // Offloading, q is copied when it is a view (of the QKV projection's output), so that
    // output's keys and values are not kept alive through it.
    const bool copy = c.opts->kv_offload != "none" && !q.is_contiguous();
    ctx->save_for_backward({copy ? q.contiguous() : q, out, lse});
    ctx->saved_data["store"] = hold(std::move(store));
    ctx->saved_data["chunk"] = c.chunk;
    ctx->saved_data["tk"] = k.size(2);
    ctx->saved_data["causal"] = c.mask->causal;
    ctx->saved_data["q_offset"] = c.mask->q_offset;
    ctx->saved_data["key_keep"] = c.mask->key_keep;
    ctx->saved_data["segment_ids"] = c.mask->segment_ids;
    return out;
  }

  // Flash attention's backward, key/value chunks outermost and in reverse (FPDT's order): each
  // chunk is read once, the next one's read overlapping this one's products.
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list g) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &q = saved[0], &out = saved[1], &lse = saved[2];
    SB_CHECK(ctx->saved_data.count("store") == 1, "fpdt: a second backward through one forward (retain_graph); "
             "its key/value chunks were freed after the first");
    KvStore& store = held(ctx->saved_data["store"].toTensor());
    const std::int64_t chunk = ctx->saved_data["chunk"].toInt(), tk = ctx->saved_data["tk"].toInt();
    AttentionMask mask;
    mask.causal = ctx->saved_data["causal"].toBool();
    mask.q_offset = ctx->saved_data["q_offset"].toInt();
    mask.key_keep = ctx->saved_data["key_keep"].toTensor();
    mask.segment_ids = ctx->saved_data["segment_ids"].toTensor();
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const auto dt = q.scalar_type(), f32 = stats_type(q);
    const std::int64_t tq = q.size(2), nkv = store.size();
    auto dout = g[0].to(f32), dout_dt = g[0].to(dt);
    auto D = (dout * out.to(f32)).sum(-1, true);  // (B, H, Tq, 1)
    auto dq = torch::zeros(q.sizes(), q.options().dtype(f32));
    std::vector<Tensor> dk(static_cast<std::size_t>(nkv)), dv(static_cast<std::size_t>(nkv));
    auto next = store.fetch(nkv - 1);
    for (std::int64_t j = nkv - 1; j >= 0; --j) {
      auto [kj, vj] = store.take(next);
      if (j > 0) next = store.fetch(j - 1);
      const std::int64_t j0 = j * chunk, nk = kj.size(2);
      auto dkj = torch::zeros(kj.sizes(), dq.options()), dvj = torch::zeros(vj.sizes(), dq.options());
      for (std::int64_t s = 0; s < tq; s += chunk) {
        const std::int64_t n = std::min(chunk, tq - s);
        if (mask.causal && mask.q_offset + s + n <= j0) continue;  // no query here sees chunk j
        auto qi = q.narrow(2, s, n);
        auto sc = torch::matmul(qi.mul(scale), kj.transpose(-2, -1)).to(f32);  // as forward
        mask_block(sc, mask, s, n, j0, nk);
        auto p = sc.sub_(lse.narrow(2, s, n)).exp_();  // (B, H, n, nk)
        auto doi = dout_dt.narrow(2, s, n);
        dvj += torch::matmul(p.to(dt).transpose(-2, -1), doi).to(f32);
        auto dp = torch::matmul(doi, vj.transpose(-2, -1)).to(f32);
        auto ds = (p * (dp - D.narrow(2, s, n))).to(dt);
        dq.narrow(2, s, n) += torch::matmul(ds, kj).to(f32) * scale;
        dkj += torch::matmul(ds.transpose(-2, -1), qi).to(f32) * scale;
      }
      dk[static_cast<std::size_t>(j)] = dkj.to(dt), dv[static_cast<std::size_t>(j)] = dvj.to(dt);
    }
    SB_CHECK(nkv * chunk >= tk, "fpdt: {} chunks of {} cover fewer than {} keys", nkv, chunk, tk);
    // Free the chunks (close the file) now, not when the whole graph goes after backward.
    ctx->saved_data.erase("store");
    return {dq.to(dt), nkv == 1 ? dk[0] : torch::cat(dk, 2), nkv == 1 ? dv[0] : torch::cat(dv, 2), Tensor()};
  }
};

class FpdtAttention final : public Attention {
 public:
  explicit FpdtAttention(AttentionOptions o) : o_(std::move(o)) {
    checked_attention_chunk(o_.chunk);
    SB_CHECK(o_.seq_chunks >= 0, "seq_chunks must be >= 0, got {}", o_.seq_chunks);
    SB_CHECK(o_.kv_offload == "none" || o_.kv_offload == "host" || o_.kv_offload == "disk",
             "kv_offload = \"{}\": use none, host or disk", o_.kv_offload);
  }
  std::string name() const override { return "fpdt"; }
  double kept_scores(bool) const override { return 0.0; }  // a row log-sum-exp only
  double executed_scores(bool causal) const override { return causal ? 0.5 : 1.0; }
  bool streams_chunks() const override { return true; }
  double kept_inputs() const override { return o_.kv_offload == "none" ? 4.0 : 2.0; }
  // Backward's gradient of a tile's scores, ds = (p (dp - D)) in the compute dtype, formed
  // while p, dp and both fp32 temporaries live: 4 fp32 (c, c) tensors and ds (the cast is
  // the tensor itself in fp32).
  double tile_bytes(std::int64_t seq, std::int64_t elt) const override {
    const auto c = static_cast<double>(std::min(seq, o_.seq_chunks > 0 ? chunks_of(seq, o_.seq_chunks) : o_.chunk));
    return c * c * static_cast<double>(elt < 4 ? 16 + elt : 16);
  }
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const AttentionMask& mask) const override {
    SB_CHECK(!mask.dropout.on(), "attention = \"fpdt\" forms no probabilities to drop; set attention_dropout = 0");
    const std::int64_t chunk = o_.seq_chunks > 0 ? chunks_of(k.size(2), o_.seq_chunks) : o_.chunk;
    const bool grad = torch::GradMode::is_enabled() &&
                      (q.requires_grad() || k.requires_grad() || v.requires_grad());
    if (!grad) return attend(q, k, v, mask, chunk, nullptr, nullptr);  // nothing to keep
    return FpdtFunction::apply(q, k, v, Call{&mask, chunk, &o_});
  }

 private:
  AttentionOptions o_;
};

const sb::Registrar kRegister([] {
  register_attention("fpdt",
                     "FPDT: the sequence in chunks (seq_chunks), online softmax, its own backward "
                     "over the chunks in reverse; keys and values kept in a chunk store until "
                     "backward (kv_offload = none | host | disk)",
                     [](const AttentionOptions& o) -> std::unique_ptr<Attention> {
                       return std::make_unique<FpdtAttention>(o);
                     },
                     /*order=*/4);
});

}  // namespace

}  // namespace sb::models
