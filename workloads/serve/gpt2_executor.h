// The serve task's model: GPT-2 on rows of a KV cache (Gpt2::forward_rows), greedy or sampled.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include <ATen/core/Generator.h>

#include "workloads/models/gpt2.h"
#include "workloads/serve/forward.h"
#include "workloads/serve/server.h"

namespace sb::serve {

// Greedy when temperature == 0, else sampled from softmax(logits / temperature) over the
// top_k largest (0: all). Each request samples from its own generator, seeded from (seed,
// request id), so its tokens do not depend on what it was batched with.
struct SamplingConfig {
  double temperature = 0;
  std::int64_t top_k = 0;
  std::uint64_t seed = 0;
};

// Keys and values of one token in every layer: 2 x n_layer x attention width elements.
std::int64_t kv_bytes_per_token(const models::ModelConfig& c, torch::ScalarType dtype);

class Gpt2Executor final : public Executor {
 public:
  // rows x capacity tokens of KV cache in the dtype and on the device of the weights.
  Gpt2Executor(models::KvDecoder& model, RunForward run, PromptOf prompt, std::int64_t rows,
               std::int64_t capacity, SamplingConfig sampling);
  std::int64_t rows() const override { return cache_.k.at(0).size(0); }
  std::int64_t row_capacity() const override { return cache_.max_len; }
  std::int64_t kv_bytes_per_token() const override { return bytes_per_token_; }
  std::vector<std::int64_t> prefill(std::int64_t first, const std::vector<std::int64_t>& requests) override;
  std::vector<std::int64_t> decode(const std::vector<std::int64_t>& requests,
                                   const std::vector<std::int64_t>& last,
                                   const std::vector<std::int64_t>& lengths) override;
  void move_row(std::int64_t from, std::int64_t to, std::int64_t length) override;

 private:
  std::vector<std::int64_t> choose(const torch::Tensor& logits, const std::vector<std::int64_t>& requests);

  models::KvDecoder& model_;
  RunForward run_;
  PromptOf prompt_;
  SamplingConfig sampling_;
  models::KVCache cache_;
  std::int64_t bytes_per_token_ = 0;
  torch::Device device_ = torch::kCPU;
  std::map<std::int64_t, at::Generator> generators_;  // per request, made at its first token
};

}  // namespace sb::serve
