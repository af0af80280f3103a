// GPT-2 as published (Radford et al. 2019; Hugging Face GPT2LMHeadModel): learned position
// embeddings, pre-LayerNorm blocks, tanh-GELU MLP of width 4d, LM head tied to wte, LayerNorm
// eps 1e-5, no dropout (determinism and equality with the sharded engine).
// Units: 0 "embed" (wte, wpe), 1..L "block.i", L+1 "head" (ln_f; re-acquires unit 0 for wte).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "workloads/models/attention.h"
#include "workloads/models/model.h"

namespace sb::models {

// Keys and values of past tokens for incremental decoding; buffers are allocated once
// for max_len tokens and filled in place.
struct KVCache {
  std::vector<torch::Tensor> k, v;  // per layer (B, H, max_len, Dh)
  std::int64_t length = 0;          // tokens already cached
  std::int64_t max_len = 0;
};

class Gpt2 final : public Model {
 public:
  explicit Gpt2(ModelConfig cfg);
  const ModelConfig& config() const override { return cfg_; }
  const std::vector<UnitSpec>& units() const override { return units_; }
  torch::Tensor loss(ParamProvider& p, const Batch& b) override;
  torch::Tensor logits(ParamProvider& p, const Batch& b) override;  // (B, T, V)
  double train_flops_per_token(std::int64_t seq_len) const override;

  // Empty cache for batch B and up to max_len tokens (<= max_pos), dtype/device of the weights.
  KVCache make_cache(std::int64_t batch, std::int64_t max_len,
                     torch::TensorOptions opts = torch::kFloat32) const;
  // ids: (B, t) new tokens after cache.length cached ones -> logits (B, t, V); appends the
  // new keys/values to the cache. Run under torch::NoGradGuard.
  torch::Tensor forward_cached(ParamProvider& p, const torch::Tensor& ids, KVCache& cache);

 private:
  // ids (B, T) -> logits (B*T, V); cache may be null (full causal forward).
  torch::Tensor forward(ParamProvider& p, const torch::Tensor& ids, KVCache* cache,
                        bool release_head_with_logits);
  ModelConfig cfg_;
  std::vector<UnitSpec> units_;
  std::unique_ptr<Attention> attn_;
};

// Decoding: greedy when temperature == 0, else sampling from softmax(logits / temperature)
// restricted to the top_k largest (0 = all), from a generator seeded with `seed`.
struct GenerateConfig {
  std::int64_t max_new_tokens = 32;
  double temperature = 0.0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 0;
};
struct GenerateResult {
  torch::Tensor tokens;               // (B, prompt + new) int64
  double time_to_first_token_s = 0;   // prompt forward + first token choice
  std::vector<double> per_token_s;    // each later token's latency
};
GenerateResult generate(Gpt2& model, ParamProvider& p, const torch::Tensor& prompt,
                        const GenerateConfig& cfg);

}  // namespace sb::models
