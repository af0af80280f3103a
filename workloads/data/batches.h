// Deterministic batch sources. A source produces the GLOBAL batch of an optimizer step from
// its seed alone; engines slice it (rows [r*B/N, (r+1)*B/N) on rank r of N, then into
// micro-batches), so any layout sees exactly the tokens the one-process reference sees.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "workloads/data/markov.h"
#include "workloads/models/model.h"

namespace sb::data {

using models::Batch;

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual std::int64_t batch_size() const = 0;  // global rows B
  virtual std::int64_t seq_len() const = 0;     // T
  // Global batch of optimizer step `step` (CPU int64 tensors, (B, T)).
  virtual Batch train(std::int64_t step) const = 0;
  // Held-out batch i, drawn from a stream disjoint from training.
  virtual Batch heldout(std::int64_t i) const = 0;
  // Best achievable mean loss (nats/token), NaN when unknown.
  virtual double loss_floor() const { return std::numeric_limits<double>::quiet_NaN(); }
};

// Rows [begin, end) of every tensor of the batch (views).
Batch slice_rows(const Batch& b, std::int64_t begin, std::int64_t end);
// Rows of rank `rank` of `ranks`; B must divide evenly (an uneven split is an error).
Batch rank_rows(const Batch& b, int rank, int ranks);
// Ulysses sequence parallelism (models/sequence_parallel.h): tokens [rank T/ranks, (rank+1)
// T/ranks) of every row, which keeps where they sit in the whole row (Batch::seq_begin,
// seq_full: positions and dropout masks follow the tokens). T must divide evenly.
// stripe > 0 (FPDT's chunks inside Ulysses, Model::sequence_stripe): the row is cut into
// chunks of ranks x stripe tokens and the rank takes its stripe of each (Batch::seq_stripe),
// so that the i-th stripes of all ranks, gathered by attention's all-to-all, are chunk i.
Batch sequence_slice(const Batch& b, int rank, int ranks, std::int64_t stripe = 0);
// n equal micro-batches in row order; B must divide evenly.
std::vector<Batch> split_rows(const Batch& b, std::int64_t n);
// Every tensor moved to `device`.
Batch to_device(const Batch& b, const torch::Device& device);

// GPT-2 language modelling on a Markov source: rows of T+1 tokens, inputs [0, T), targets [1, T].
class MarkovLmBatches final : public BatchSource {
 public:
  MarkovLmBatches(MarkovConfig markov, std::int64_t batch, std::int64_t seq_len, std::uint64_t seed);
  std::int64_t batch_size() const override { return batch_; }
  std::int64_t seq_len() const override { return seq_; }
  Batch train(std::int64_t step) const override { return make(0, step); }
  Batch heldout(std::int64_t i) const override { return make(1, i); }
  double loss_floor() const override { return source_.entropy_rate(); }
  const MarkovSource& source() const { return source_; }

 private:
  Batch make(std::uint64_t stream, std::int64_t index) const;
  MarkovSource source_;
  std::int64_t batch_, seq_;
  std::uint64_t seed_;
};

// GPT-2 language modelling on a token stream (a .bin file or a tokenized text): each row
// starts at a seeded random offset; the last `heldout_fraction` of the tokens is held out.
class TokenLmBatches final : public BatchSource {
 public:
  TokenLmBatches(std::shared_ptr<const std::vector<std::int32_t>> tokens, std::int64_t batch,
                 std::int64_t seq_len, std::uint64_t seed, double heldout_fraction = 0.1);
  // Separate streams (a text corpus split by document, text_corpus.h): training rows from
  // `train`, held-out rows from `heldout`.
  TokenLmBatches(const std::vector<std::int32_t>& train, const std::vector<std::int32_t>& heldout,
                 std::int64_t batch, std::int64_t seq_len, std::uint64_t seed);
  std::int64_t batch_size() const override { return batch_; }
  std::int64_t seq_len() const override { return seq_; }
  Batch train(std::int64_t step) const override { return make(0, step, 0, split_); }
  Batch heldout(std::int64_t i) const override { return make(1, i, split_, tokens_->size()); }

 private:
  Batch make(std::uint64_t stream, std::int64_t index, std::size_t begin, std::size_t end) const;
  std::shared_ptr<const std::vector<std::int32_t>> tokens_;
  std::int64_t batch_, seq_;
  std::uint64_t seed_;
  std::size_t split_;
};

// BERT masked-language-model masking (Devlin et al.): each non-special real token is chosen
// with probability `prob`; a chosen token becomes [MASK] 80%, a random token 10%, itself 10%.
struct MlmConfig {
  double prob = 0.15;
  std::int64_t pad_id = 0, cls_id = 101, sep_id = 102, mask_id = 103;
  std::int64_t random_low = 0, random_high = 30522;  // random replacements from [low, high)
};
// input_ids (B, T) CPU int64 are masked in place; returns targets (B, T): the original id at
// chosen positions, -100 elsewhere. Padding (attention_mask 0) and [CLS]/[SEP]/[PAD] are never chosen.
torch::Tensor mlm_mask(torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const MlmConfig& cfg, std::uint64_t key);

// BERT MLM on a Markov source: [CLS] tokens [SEP] [PAD]..., real length drawn in [T/2, T],
// Markov tokens shifted past the special ids (markov.offset), masked with mlm_mask.
// With `classify`, every row also gets a label: which of two Markov sources (seeds
// markov.seed and markov.seed + 1) produced it, a task learnable from bigram statistics.
class MarkovMlmBatches final : public BatchSource {
 public:
  MarkovMlmBatches(MarkovConfig markov, MlmConfig mlm, std::int64_t batch, std::int64_t seq_len,
                   std::uint64_t seed, bool classify = false);
  std::int64_t batch_size() const override { return batch_; }
  std::int64_t seq_len() const override { return seq_; }
  Batch train(std::int64_t step) const override { return make(0, step); }
  Batch heldout(std::int64_t i) const override { return make(1, i); }

 private:
  Batch make(std::uint64_t stream, std::int64_t index) const;
  MarkovSource a_, b_;
  MlmConfig mlm_;
  std::int64_t batch_, seq_;
  std::uint64_t seed_;
  bool classify_;
};

// BERT MLM on token streams (a text corpus tokenized with WordPiece, text_corpus.h): each row
// is [CLS], T-2 consecutive tokens from a seeded offset, [SEP], all real, masked with
// mlm_mask; training rows from `train`, held-out rows from `heldout`.
class TokenMlmBatches final : public BatchSource {
 public:
  TokenMlmBatches(const std::vector<std::int32_t>& train, const std::vector<std::int32_t>& heldout,
                  MlmConfig mlm, std::int64_t batch, std::int64_t seq_len, std::uint64_t seed);
  std::int64_t batch_size() const override { return batch_; }
  std::int64_t seq_len() const override { return seq_; }
  Batch train(std::int64_t step) const override { return make(0, step, train_); }
  Batch heldout(std::int64_t i) const override { return make(1, i, heldout_); }

 private:
  Batch make(std::uint64_t stream, std::int64_t index, const std::vector<std::int32_t>& from) const;
  std::vector<std::int32_t> train_, heldout_;
  MlmConfig mlm_;
  std::int64_t batch_, seq_;
  std::uint64_t seed_;
};

// The synthetic corpus of a model: GPT-2, next-token batches of a Markov chain over its whole
// vocabulary; BERT, MLM batches of a chain over the ids past its special tokens. The chain
// depends only on the model and chain_seed, the rows drawn on stream_seed: `train` and
// `infer` call this with the same chain_seed (the point's seed), so a model trained by one
// is scored by the other on its own distribution.
std::unique_ptr<BatchSource> markov_source(const models::ModelConfig& m, std::int64_t batch,
                                           std::int64_t seq_len, std::uint64_t chain_seed,
                                           std::uint64_t stream_seed);

}  // namespace sb::data
