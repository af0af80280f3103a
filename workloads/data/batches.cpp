// Batch sources: Markov LM, token-stream LM, Markov MLM (+ classification), and slicing.
#include "workloads/data/batches.h"

#include "harness/core/check.h"
#include "workloads/models/family.h"
#include "workloads/data/rng.h"

namespace sb::data {
namespace {

torch::Tensor rows(const torch::Tensor& t, std::int64_t begin, std::int64_t end) {
  return t.defined() ? t.narrow(0, begin, end - begin) : t;
}

}  // namespace

Batch slice_rows(const Batch& b, std::int64_t begin, std::int64_t end) {
  SB_CHECK(begin >= 0 && begin <= end && end <= b.input_ids.size(0),
           "slice_rows: rows [{}, {}) outside the batch of {}", begin, end, b.input_ids.size(0));
  Batch out{rows(b.input_ids, begin, end), rows(b.targets, begin, end), rows(b.attention_mask, begin, end),
            rows(b.token_type_ids, begin, end), rows(b.labels, begin, end)};
  out.row0 = b.row0 + begin;  // dropout masks follow the rows (models/dropout.h)
  out.dropout_step = b.dropout_step;
  out.seq_begin = b.seq_begin, out.seq_full = b.seq_full, out.seq_stripe = b.seq_stripe;
  return out;
}

Batch sequence_slice(const Batch& b, int rank, int ranks, std::int64_t stripe) {
  if (ranks == 1) return b;
  const std::int64_t B = b.input_ids.size(0), T = b.input_ids.size(1);
  SB_CHECK(ranks > 0 && T % ranks == 0 && b.seq_full == 0,
           "sequence parallelism splits rows of {} tokens into mesh.sp = {} equal slices: seq must "
           "divide by sp", T, ranks);
  SB_CHECK(!b.labels.defined() && !b.position_ids.defined() && !b.segment_ids.defined(),
           "sequence parallelism splits token-level batches only (no labels, packed rows)");
  const std::int64_t n = T / ranks;
  if (stripe >= n) stripe = 0;  // one stripe: the contiguous slice
  SB_CHECK(stripe >= 0 && (stripe == 0 || n % stripe == 0), "sequence parallelism: a slice of {} tokens "
           "(seq {} / mesh.sp {}) is not stripes of {} (seq_chunks must divide it)", n, T, ranks, stripe);
  const auto cols = [&](const torch::Tensor& t) {
    if (!t.defined()) return t;
    if (stripe == 0) return t.narrow(1, rank * n, n).contiguous();
    // (B, T) -> (B, T / (ranks stripe), ranks, stripe): this rank's stripe of each chunk.
    return t.reshape({B, T / (ranks * stripe), ranks, stripe}).select(2, rank).reshape({B, n}).contiguous();
  };
  Batch out{cols(b.input_ids), cols(b.targets), cols(b.attention_mask), cols(b.token_type_ids)};
  out.row0 = b.row0, out.dropout_step = b.dropout_step;
  out.seq_begin = rank * (stripe == 0 ? n : stripe), out.seq_full = T, out.seq_stripe = stripe;
  return out;
}

Batch rank_rows(const Batch& b, int rank, int ranks) {
  const std::int64_t B = b.input_ids.size(0);
  SB_CHECK(ranks > 0 && B % ranks == 0,
           "global batch of {} rows does not split evenly over {} ranks; make batch a multiple of the rank count",
           B, ranks);
  return slice_rows(b, rank * (B / ranks), (rank + 1) * (B / ranks));
}

std::vector<Batch> split_rows(const Batch& b, std::int64_t n) {
  const std::int64_t B = b.input_ids.size(0);
  SB_CHECK(n > 0 && B % n == 0,
           "batch of {} rows does not split into {} equal micro-batches; make it a multiple", B, n);
  std::vector<Batch> out;
  for (std::int64_t i = 0; i < n; ++i) out.push_back(slice_rows(b, i * (B / n), (i + 1) * (B / n)));
  return out;
}

Batch to_device(const Batch& b, const torch::Device& device) {
  auto mv = [&](const torch::Tensor& t) { return t.defined() ? t.to(device) : t; };
  Batch out{mv(b.input_ids), mv(b.targets), mv(b.attention_mask), mv(b.token_type_ids), mv(b.labels)};
  out.row0 = b.row0, out.dropout_step = b.dropout_step;
  out.seq_begin = b.seq_begin, out.seq_full = b.seq_full, out.seq_stripe = b.seq_stripe;
  return out;
}

MarkovLmBatches::MarkovLmBatches(MarkovConfig markov, std::int64_t batch, std::int64_t seq_len,
                                 std::uint64_t seed)
    : source_(markov), batch_(batch), seq_(seq_len), seed_(seed) {
  SB_CHECK(batch > 0 && seq_len > 0, "batch ({}) and seq_len ({}) must be positive", batch, seq_len);
}

Batch MarkovLmBatches::make(std::uint64_t stream, std::int64_t index) const {
  auto all = torch::empty({batch_, seq_ + 1}, torch::kLong);  // (B, T+1)
  auto* p = all.data_ptr<std::int64_t>();
  for (std::int64_t r = 0; r < batch_; ++r)
    source_.sample(Rng(seed_, stream, static_cast<std::uint64_t>(index), static_cast<std::uint64_t>(r)).next(),
                   seq_ + 1, p + r * (seq_ + 1));
  Batch b;
  b.input_ids = all.narrow(1, 0, seq_).contiguous();
  b.targets = all.narrow(1, 1, seq_).contiguous();
  return b;
}

TokenLmBatches::TokenLmBatches(std::shared_ptr<const std::vector<std::int32_t>> tokens,
                               std::int64_t batch, std::int64_t seq_len, std::uint64_t seed,
                               double heldout_fraction)
    : tokens_(std::move(tokens)), batch_(batch), seq_(seq_len), seed_(seed) {
  const auto n = tokens_->size();
  split_ = static_cast<std::size_t>(static_cast<double>(n) * (1.0 - heldout_fraction));
  SB_CHECK(split_ > static_cast<std::size_t>(seq_len + 1) && n - split_ > static_cast<std::size_t>(seq_len + 1),
           "token stream of {} tokens is too short for sequences of {} with {} held out; "
           "use a longer file or a shorter seq_len", n, seq_len, heldout_fraction);
}

TokenLmBatches::TokenLmBatches(const std::vector<std::int32_t>& train,
                               const std::vector<std::int32_t>& heldout, std::int64_t batch,
                               std::int64_t seq_len, std::uint64_t seed)
    : batch_(batch), seq_(seq_len), seed_(seed), split_(train.size()) {
  const auto need = static_cast<std::size_t>(seq_len + 1);
  SB_CHECK(train.size() >= need && heldout.size() >= need,
           "the text corpus has {} training and {} held-out tokens; sequences of {} need at "
           "least {} in each (more text, more held-out documents, or a shorter seq)",
           train.size(), heldout.size(), seq_len, need);
  auto all = std::make_shared<std::vector<std::int32_t>>(train);
  all->insert(all->end(), heldout.begin(), heldout.end());
  tokens_ = std::move(all);
}

Batch TokenLmBatches::make(std::uint64_t stream, std::int64_t index, std::size_t begin,
                           std::size_t end) const {
  auto all = torch::empty({batch_, seq_ + 1}, torch::kLong);  // (B, T+1)
  auto* p = all.data_ptr<std::int64_t>();
  const std::uint64_t starts = end - begin - static_cast<std::size_t>(seq_ + 1) + 1;
  for (std::int64_t r = 0; r < batch_; ++r) {
    const std::size_t off = begin + Rng(seed_, stream, static_cast<std::uint64_t>(index),
                                        static_cast<std::uint64_t>(r)).below(starts);
    for (std::int64_t t = 0; t <= seq_; ++t) p[r * (seq_ + 1) + t] = (*tokens_)[off + t];
  }
  Batch b;
  b.input_ids = all.narrow(1, 0, seq_).contiguous();
  b.targets = all.narrow(1, 1, seq_).contiguous();
  return b;
}

torch::Tensor mlm_mask(torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const MlmConfig& cfg, std::uint64_t key) {
  SB_CHECK(input_ids.device().is_cpu() && input_ids.scalar_type() == torch::kLong && input_ids.is_contiguous(),
           "mlm_mask: input_ids must be contiguous CPU int64");
  SB_CHECK(cfg.random_high > cfg.random_low, "mlm_mask: empty random range [{}, {})", cfg.random_low, cfg.random_high);
  auto targets = torch::full_like(input_ids, -100);
  auto* ids = input_ids.data_ptr<std::int64_t>();
  auto* tg = targets.data_ptr<std::int64_t>();
  torch::Tensor am = attention_mask.defined() ? attention_mask.to(torch::kLong).contiguous() : attention_mask;
  const std::int64_t* keep = am.defined() ? am.data_ptr<std::int64_t>() : nullptr;
  Rng rng(key, 0x6d6c6dULL);
  for (std::int64_t i = 0; i < input_ids.numel(); ++i) {
    // Draw for every position so a position's fate does not depend on its neighbours' ids.
    const double choose = rng.uniform(), how = rng.uniform();
    const std::uint64_t rnd = rng.next();
    const std::int64_t id = ids[i];
    if ((keep && keep[i] == 0) || id == cfg.pad_id || id == cfg.cls_id || id == cfg.sep_id) continue;
    if (choose >= cfg.prob) continue;
    tg[i] = id;
    if (how < 0.8) ids[i] = cfg.mask_id;
    else if (how < 0.9) ids[i] = cfg.random_low + static_cast<std::int64_t>(rnd % static_cast<std::uint64_t>(cfg.random_high - cfg.random_low));
  }
  return targets;
}

namespace {
MarkovConfig second(MarkovConfig c) {
  c.seed += 1;
  return c;
}
}  // namespace

MarkovMlmBatches::MarkovMlmBatches(MarkovConfig markov, MlmConfig mlm, std::int64_t batch,
                                   std::int64_t seq_len, std::uint64_t seed, bool classify)
    : a_(markov), b_(second(markov)), mlm_(mlm), batch_(batch), seq_(seq_len), seed_(seed), classify_(classify) {
  SB_CHECK(seq_len >= 4, "BERT sequences need at least 4 positions ([CLS] x y [SEP]), got {}", seq_len);
  SB_CHECK(batch > 0, "batch must be positive, got {}", batch);
}

Batch MarkovMlmBatches::make(std::uint64_t stream, std::int64_t index) const {
  auto ids = torch::full({batch_, seq_}, mlm_.pad_id, torch::kLong);  // (B, T)
  auto mask = torch::zeros({batch_, seq_}, torch::kLong);
  auto labels = torch::zeros({batch_}, torch::kLong);
  auto* p = ids.data_ptr<std::int64_t>();
  auto* m = mask.data_ptr<std::int64_t>();
  std::vector<std::int64_t> body(seq_);
  for (std::int64_t r = 0; r < batch_; ++r) {
    Rng rng(seed_, stream, static_cast<std::uint64_t>(index), static_cast<std::uint64_t>(r));
    const std::int64_t len = seq_ / 2 + static_cast<std::int64_t>(rng.below(seq_ - seq_ / 2 + 1));  // [T/2, T]
    const bool from_b = classify_ && (rng.next() & 1);
    (from_b ? b_ : a_).sample(rng.next(), len - 2, body.data());
    labels[r] = from_b ? 1 : 0;
    p[r * seq_] = mlm_.cls_id;
    for (std::int64_t t = 0; t < len - 2; ++t) p[r * seq_ + 1 + t] = body[t];
    p[r * seq_ + len - 1] = mlm_.sep_id;
    for (std::int64_t t = 0; t < len; ++t) m[r * seq_ + t] = 1;
  }
  Batch b;
  b.targets = mlm_mask(ids, mask, mlm_, Rng(seed_, stream + 2, static_cast<std::uint64_t>(index)).next());
  b.input_ids = ids;
  b.attention_mask = mask;
  b.token_type_ids = torch::zeros({batch_, seq_}, torch::kLong);
  if (classify_) b.labels = labels;
  return b;
}

TokenMlmBatches::TokenMlmBatches(const std::vector<std::int32_t>& train,
                                 const std::vector<std::int32_t>& heldout, MlmConfig mlm,
                                 std::int64_t batch, std::int64_t seq_len, std::uint64_t seed)
    : train_(train), heldout_(heldout), mlm_(mlm), batch_(batch), seq_(seq_len), seed_(seed) {
  const auto need = static_cast<std::size_t>(seq_len - 2);
  SB_CHECK(seq_len >= 3 && train.size() >= need && heldout.size() >= need,
           "the text corpus has {} training and {} held-out tokens; MLM rows of {} need at least "
           "{} in each (more text, more held-out documents, or a shorter seq)", train.size(),
           heldout.size(), seq_len, need);
}

Batch TokenMlmBatches::make(std::uint64_t stream, std::int64_t index,
                            const std::vector<std::int32_t>& from) const {
  auto ids = torch::empty({batch_, seq_}, torch::kLong);  // (B, T)
  auto* p = ids.data_ptr<std::int64_t>();
  const std::size_t body = static_cast<std::size_t>(seq_ - 2);
  const std::uint64_t starts = from.size() - body + 1;
  for (std::int64_t r = 0; r < batch_; ++r) {
    const std::size_t off = Rng(seed_, stream, static_cast<std::uint64_t>(index),
                                static_cast<std::uint64_t>(r)).below(starts);
    p[r * seq_] = mlm_.cls_id;
    for (std::size_t t = 0; t < body; ++t) p[r * seq_ + 1 + static_cast<std::int64_t>(t)] = from[off + t];
    p[r * seq_ + seq_ - 1] = mlm_.sep_id;
  }
  auto mask = torch::ones({batch_, seq_}, torch::kLong);
  Batch b;
  b.targets = mlm_mask(ids, mask, mlm_, Rng(seed_, stream + 2, static_cast<std::uint64_t>(index)).next());
  b.input_ids = ids;
  b.attention_mask = mask;
  b.token_type_ids = torch::zeros({batch_, seq_}, torch::kLong);
  return b;
}

std::unique_ptr<BatchSource> markov_source(const models::ModelConfig& m, std::int64_t batch,
                                           std::int64_t seq_len, std::uint64_t chain_seed,
                                           std::uint64_t stream_seed) {
  MarkovConfig mk;
  mk.seed = chain_seed;
  if (models::family(m.family).objective == models::Objective::MaskedLm) {
    MlmConfig mlm;
    mk.offset = mlm.mask_id + 1;  // Markov tokens start past the special ids
    SB_CHECK(m.vocab > mk.offset + 8, "model {} has vocab {}: too small for MLM data", m.preset,
             m.vocab);
    mk.vocab = m.vocab - mk.offset;
    mlm.random_low = mk.offset;
    mlm.random_high = m.vocab;
    return std::make_unique<MarkovMlmBatches>(mk, mlm, batch, seq_len, stream_seed);
  }
  mk.vocab = m.vocab;
  return std::make_unique<MarkovLmBatches>(mk, batch, seq_len, stream_seed);
}

}  // namespace sb::data
