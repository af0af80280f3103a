// GPT-2 on rows of a KV cache (gpt2_executor.h).
#include "workloads/serve/gpt2_executor.h"

#include <algorithm>
#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include "harness/core/check.h"
#include "workloads/data/rng.h"

namespace sb::serve {

std::int64_t kv_bytes_per_token(const models::ModelConfig& c, torch::ScalarType dtype) {
  return 2 * c.n_layer * c.attn_width() * static_cast<std::int64_t>(c10::elementSize(dtype));
}

Gpt2Executor::Gpt2Executor(models::KvDecoder& model, RunForward run, PromptOf prompt,
                           std::int64_t rows, std::int64_t capacity, SamplingConfig sampling)
    : model_(model), run_(std::move(run)), prompt_(std::move(prompt)), sampling_(sampling) {
  // The cache takes the dtype and device the weights compute in (a quantized provider's).
  torch::TensorOptions opts;
  run_([&](models::ParamProvider& p) {
    auto wte = p.acquire(0)[0];
    p.release(0, wte);
    opts = wte.options();
    device_ = wte.device();
    return wte;
  });
  cache_ = model_.make_cache(rows, capacity, opts);
  bytes_per_token_ = serve::kv_bytes_per_token(model_.config(), opts.dtype().toScalarType());
}

std::vector<std::int64_t> Gpt2Executor::prefill(std::int64_t first, const std::vector<std::int64_t>& requests) {
  const auto n = static_cast<std::int64_t>(requests.size());
  std::vector<std::vector<std::int64_t>> prompts;
  std::int64_t longest = 0;
  for (auto id : requests) {
    prompts.push_back(prompt_(id));
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(prompts.back().size()));
  }
  auto ids = torch::zeros({n, longest}, torch::kLong);  // right padding with token 0
  std::vector<std::int64_t> past(n, 0), last(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto len = static_cast<std::int64_t>(prompts[i].size());
    ids[i].narrow(0, 0, len).copy_(torch::tensor(prompts[i], torch::kLong));
    last[i] = len - 1;
  }
  ids = ids.to(device_);
  auto logits = run_([&](models::ParamProvider& p) {
    return model_.forward_rows(p, ids, cache_, first, past, last);
  });
  return choose(logits, requests);
}

std::vector<std::int64_t> Gpt2Executor::decode(const std::vector<std::int64_t>& requests,
                                               const std::vector<std::int64_t>& last,
                                               const std::vector<std::int64_t>& lengths) {
  const auto n = static_cast<std::int64_t>(requests.size());
  auto ids = torch::tensor(last, torch::kLong).view({n, 1}).to(device_);
  const std::vector<std::int64_t> at(n, 0);
  auto logits = run_([&](models::ParamProvider& p) {
    return model_.forward_rows(p, ids, cache_, 0, lengths, at);
  });
  return choose(logits, requests);
}

void Gpt2Executor::move_row(std::int64_t from, std::int64_t to, std::int64_t length) {
  for (std::size_t l = 0; l < cache_.k.size(); ++l) {
    cache_.k[l][to].narrow(1, 0, length).copy_(cache_.k[l][from].narrow(1, 0, length));
    cache_.v[l][to].narrow(1, 0, length).copy_(cache_.v[l][from].narrow(1, 0, length));
  }
}

// logits (n, V) -> a token per row; rows of request -1 (padding) take the argmax.
std::vector<std::int64_t> Gpt2Executor::choose(const torch::Tensor& logits,
                                               const std::vector<std::int64_t>& requests) {
  // max's index is the first maximal one, as argmax's, and 5x faster on bf16 (50k columns).
  auto greedy = std::get<1>(logits.max(-1)).cpu();
  std::vector<std::int64_t> out(greedy.data_ptr<std::int64_t>(),
                                greedy.data_ptr<std::int64_t>() + greedy.numel());
  if (sampling_.temperature <= 0) return out;
  auto scaled = logits.to(torch::kCPU, torch::kFloat).div(sampling_.temperature);  // (n, V)
  for (std::size_t r = 0; r < requests.size(); ++r) {
    if (requests[r] < 0) continue;
    auto row = scaled[static_cast<std::int64_t>(r)];
    if (sampling_.top_k > 0 && sampling_.top_k < row.size(0)) {
      auto kth = std::get<0>(row.topk(sampling_.top_k)).narrow(0, sampling_.top_k - 1, 1);
      row = row.masked_fill(row < kth, -INFINITY);
    }
    auto it = generators_.find(requests[r]);
    if (it == generators_.end())
      it = generators_
               .emplace(requests[r], at::make_generator<at::CPUGeneratorImpl>(data::splitmix64(
                                         sampling_.seed ^ data::splitmix64(static_cast<std::uint64_t>(requests[r])))))
               .first;
    out[r] = at::multinomial(torch::softmax(row, -1), 1, false, it->second).item<std::int64_t>();
  }
  return out;
}

}  // namespace sb::serve
