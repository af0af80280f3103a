// What serving asks of a model that generates on a KV cache (serve/gpt2_executor.h), so it
// never needs the model's class: Model::kv_decoder() returns it, or nullptr for a model that
// does not decode incrementally (BERT). GPT-2 is one today; a new causal family implements
// these two calls and serves unchanged.
#pragma once
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "workloads/models/model.h"

namespace sb::models {

// Keys and values of past tokens for incremental decoding; buffers are allocated once
// for max_len tokens and filled in place.
struct KVCache {
  std::vector<torch::Tensor> k, v;  // per layer (B, H, max_len, Dh)
  std::int64_t length = 0;          // tokens already cached
  std::int64_t max_len = 0;
};

class KvDecoder {
 public:
  virtual ~KvDecoder() = default;
  virtual const ModelConfig& config() const = 0;
  // Empty cache for batch B and up to max_len tokens (<= max_pos), dtype/device of `opts`.
  virtual KVCache make_cache(std::int64_t batch, std::int64_t max_len,
                             torch::TensorOptions opts = torch::kFloat32) const = 0;
  // Rows [first_row, first_row + B) of a cache of many rows, each with its own length: a
  // prefill (every past[b] is 0) or a decode step (T == 1); the logits (B, V) at each row's
  // position last[b] of the T new ones (gpt2.h says the details).
  virtual torch::Tensor forward_rows(ParamProvider& p, const torch::Tensor& ids, KVCache& cache,
                                     std::int64_t first_row, const std::vector<std::int64_t>& past,
                                     const std::vector<std::int64_t>& last) = 0;
};

}  // namespace sb::models
