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

// The keep mask (rows, features) of tokens `token` at `site` (1 kept, 0 dropped), for tests.
torch::Tensor dropout_keep(std::uint64_t key, std::int64_t site, const torch::Tensor& token,
                           std::int64_t features, double p);
std::uint64_t dropout_key(std::uint64_t seed, std::int64_t step);

// Sites: the embeddings 0; block l's attention output 1 + 2l, its MLP output 2 + 2l.
inline std::int64_t embed_site() { return 0; }
inline std::int64_t attn_site(std::int64_t layer) { return 1 + 2 * layer; }
inline std::int64_t mlp_site(std::int64_t layer) { return 2 + 2 * layer; }

}  // namespace sb::models
