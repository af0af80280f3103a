// Dropout whose masks do not depend on the mesh (the Longctx issue; Megatron tracks RNG
// states per rank to get the same effect). Element j of token g (g = row x T + t, its index
// in the step's global batch) at site s (a place in the model: the embeddings, a block's
// attention output or MLP output) is kept iff u(seed, step, s, g, j) >= p, u a counter-based
// hash of those integers into [0, 1), and scaled by 1 / (1 - p). So a token gets the same mask
// on whatever data-parallel rank, micro-batch or pipeline stage holds it, the tensor-parallel
// ranks that hold the same rows draw the same masks, and a recomputation replays the forward's
// masks exactly. Evaluation and inference run without (Batch::dropout_step < 0).
// Cost: about 20 integer tensor ops per element of each site's (rows, d) activation.
#pragma once
#include <cstdint>
#include <string>

#include <torch/types.h>

namespace sb::models {

struct Batch;

struct DropoutRows {
  double p = 0;
  std::uint64_t key = 0;  // seed and step mixed
  torch::Tensor token;    // (rows) int64: the global token index of each row of x
  bool on() const { return p > 0 && token.defined(); }
  // x (rows, F): its whole feature width (the residual stream, replicated over tp).
  torch::Tensor apply(const torch::Tensor& x, std::int64_t site) const;
};

// The rows a forward of b runs (b's B x T tokens, global row b.row0 on; under sequence
// parallelism only [first, first + count) of them); off when p = 0 or b.dropout_step < 0.
DropoutRows dropout_rows(double p, std::uint64_t seed, const Batch& b, std::int64_t first = 0,
                         std::int64_t count = -1);

// The keep mask (rows, features) of tokens `token` at `site` (1 kept, 0 dropped): element j
// of token g is g x stride + j (stride < 0: features; a causal chunk of keys is a prefix).
torch::Tensor dropout_keep(std::uint64_t key, std::int64_t site, const torch::Tensor& token,
                           std::int64_t features, double p, std::int64_t stride = -1);
std::uint64_t dropout_key(std::uint64_t seed, std::int64_t step);

// Sites: the embeddings 0; block l's attention output 1 + 2l, its MLP output 2 + 2l; its
// attention probabilities 2^40 + l; BERT's pooled output 2^41 (keyed by [CLS] tokens).
inline std::int64_t embed_site() { return 0; }
inline std::int64_t attn_site(std::int64_t layer) { return 1 + 2 * layer; }
inline std::int64_t mlp_site(std::int64_t layer) { return 2 + 2 * layer; }
inline std::int64_t probs_site(std::int64_t layer) { return (std::int64_t{1} << 40) + layer; }
inline std::int64_t pooled_site() { return std::int64_t{1} << 41; }  // BERT's pooled output

// What a model drops (Model::set_dropout): the residual stream's probability, the attention
// probabilities' (attention_dropout; only variants whose probabilities exist can), the seed.
struct DropoutConfig {
  double hidden = 0, attention = 0;
  std::uint64_t seed = 0;
};

// Dropout on attention probabilities (B, H, Tq, Tk): element (b, h, i, j) is token
// (row_head[b, h] x Tq + i)'s feature j of Tk, row_head the global (row x heads + head).
struct AttentionDropout {
  double p = 0;
  std::uint64_t key = 0;
  std::int64_t site = 0;
  torch::Tensor row_head;  // (B, H) int64; undefined: off
  bool on() const { return p > 0 && row_head.defined(); }
  // probs (B, H, n, nk): queries [q_begin, q_begin + n) of tq, keys [0, nk) of tk.
  torch::Tensor apply(const torch::Tensor& probs, std::int64_t q_begin, std::int64_t tq,
                      std::int64_t tk) const;
};
// The attention dropout of a forward of b over `heads` of the model's n_head starting at head
// `head0` (a tp rank's); off when p = 0 or b.dropout_step < 0. site: set per layer.
AttentionDropout attention_dropout(double p, std::uint64_t seed, const Batch& b,
                                   std::int64_t n_head, std::int64_t head0, std::int64_t heads);

// A model's dropout (GPT-2's and BERT's): its configuration, and the masks of the training
// forward under way (loss_with, stage_forward), off otherwise (evaluation, decoding).
struct ModelDropout {
  DropoutConfig cfg;
  DropoutRows rows;       // the residual stream's
  AttentionDropout attn;  // the attention probabilities' (its site set per layer)
  // Checks d against what the model's attention variant can do and keeps it.
  void configure(const DropoutConfig& d, const std::string& preset, bool attention_drops,
                 const std::string& attention);
  // The masks of a forward of b, until the scope ends: n_head heads split over tp_size ranks
  // (this one tp_rank), the rows too under sequence parallelism (rows_split).
  struct Scope {
    ModelDropout& m;
    explicit Scope(ModelDropout& md) : m(md) {}
    Scope(const Scope&) = delete;
    ~Scope() { m.rows = {}, m.attn = {}; }
  };
  // Under Ulysses (sp_size > 1) this rank's attention runs heads [sp_rank H', (sp_rank+1) H')
  // of its tp rank's n_head / tp_size (H' = n_head / tp_size / sp_size) on the whole sequence.
  [[nodiscard]] Scope begin(const Batch& b, std::int64_t n_head, int tp_rank, int tp_size,
                            bool rows_split, int sp_rank = 0, int sp_size = 1);
};

}  // namespace sb::models
